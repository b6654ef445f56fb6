// tests/config/cuda_graph_config_test.cpp — migration and normalization of the CUDA-graph inputs:
// one test per row of the seed-002 migration table, per conflict and per normalization error,
// with the exact messages.
#include "graphed/config/cuda_graph_config.h"

#include <gtest/gtest.h>

namespace graphed::config {
namespace {

struct Migrated {
  CudaGraphConfig config;
  IssueList issues;
};

Migrated migrate(const CudaGraphInputs& inputs) {
  Migrated result;
  result.config = migrate_cuda_graph_inputs(inputs, result.issues);
  return result;
}

ConfigIssue single(const Migrated& migrated) {
  if (migrated.issues.all().size() != 1) {
    std::string all;
    for (const auto& issue : migrated.issues.all()) all += format_issue(issue) + "\n";
    ADD_FAILURE() << "expected one issue, got:\n" << all;
    return {};
  }
  return migrated.issues.all().front();
}

std::vector<CudaGraphModule> modules(std::initializer_list<CudaGraphModule> list) { return list; }

TEST(CudaGraphConfigTest, EnumSpellingsRoundTrip) {
  for (const auto& name : cuda_graph_impl_names()) EXPECT_EQ(to_string(*parse_cuda_graph_impl(name)), name);
  for (const auto& name : cuda_graph_module_names()) EXPECT_EQ(to_string(*parse_cuda_graph_module(name)), name);
  for (const auto& name : inference_cuda_graph_scope_names())
    EXPECT_EQ(to_string(*parse_inference_cuda_graph_scope(name)), name);
  EXPECT_EQ(static_cast<int>(CudaGraphModule::kMoePreprocess), 5);  // Megatron's ordinals
  EXPECT_EQ(parse_cuda_graph_impl("full"), std::nullopt);
  EXPECT_EQ(parse_cuda_graph_module("full_iteration"), std::nullopt);
}

TEST(CudaGraphConfigTest, DefaultsMigrateToNothing) {
  const Migrated m = migrate({});
  EXPECT_TRUE(m.issues.all().empty());
  EXPECT_EQ(m.config.impl, CudaGraphImpl::kNone);
  EXPECT_TRUE(m.config.modules.empty());
  EXPECT_EQ(m.config.inference_scope, InferenceCudaGraphScope::kNone);
  EXPECT_EQ(m.config.warmup_steps, 3);
}

TEST(CudaGraphConfigTest, LocalDefaultsToLayerInferenceScope) {
  CudaGraphInputs in;
  in.impl = "local";
  const Migrated m = migrate(in);
  EXPECT_TRUE(m.issues.all().empty());
  EXPECT_EQ(m.config.inference_scope, InferenceCudaGraphScope::kLayer);
  in.impl = "transformer_engine";
  EXPECT_EQ(migrate(in).config.inference_scope, InferenceCudaGraphScope::kNone);
  in.impl = "full_iteration";
  EXPECT_EQ(migrate(in).config.inference_scope, InferenceCudaGraphScope::kNone);
}

// ---- seed-002 migration table, row by row --------------------------------------------------

TEST(CudaGraphConfigTest, EnableCudaGraphMigratesToLocal) {
  CudaGraphInputs in;
  in.enable_cuda_graph = true;
  const Migrated m = migrate(in);
  EXPECT_EQ(m.config.impl, CudaGraphImpl::kLocal);
  const ConfigIssue issue = single(m);
  EXPECT_EQ(issue.rule, "M1");
  EXPECT_EQ(issue.severity, Severity::kWarning);
  EXPECT_EQ(issue.message, "--enable-cuda-graph is deprecated; using --cuda-graph-impl local");
}

TEST(CudaGraphConfigTest, ExternalCudaGraphMigratesToTransformerEngine) {
  CudaGraphInputs in;
  in.external_cuda_graph = true;
  const Migrated m = migrate(in);
  EXPECT_EQ(m.config.impl, CudaGraphImpl::kTransformerEngine);
  EXPECT_EQ(single(m).message, "--external-cuda-graph is deprecated; using --cuda-graph-impl transformer_engine");
}

TEST(CudaGraphConfigTest, CudaGraphScopeMigratesToModules) {
  CudaGraphInputs in;
  in.impl = "transformer_engine";
  in.scope = std::vector<std::string>{"attn", "mlp"};
  const Migrated m = migrate(in);
  EXPECT_EQ(m.config.modules, modules({CudaGraphModule::kAttn, CudaGraphModule::kMlp}));
  const ConfigIssue issue = single(m);
  EXPECT_EQ(issue.rule, "M3");
  EXPECT_EQ(issue.message, "--cuda-graph-scope is deprecated; using --cuda-graph-modules attn mlp");
}

TEST(CudaGraphConfigTest, FullMigratesToWholeLayer) {
  CudaGraphInputs in;
  in.impl = "local";
  in.modules = std::vector<std::string>{"full"};
  const Migrated m = migrate(in);
  EXPECT_TRUE(m.config.modules.empty());
  const ConfigIssue issue = single(m);
  EXPECT_EQ(issue.rule, "M4");
  EXPECT_EQ(issue.message,
            "--cuda-graph-modules full is deprecated; using an empty --cuda-graph-modules (the whole layer)");
}

TEST(CudaGraphConfigTest, LocalWithFullIterationMigratesToFullIterationImpl) {
  CudaGraphInputs in;
  in.impl = "local";
  in.scope = std::vector<std::string>{"full_iteration"};
  const Migrated m = migrate(in);
  EXPECT_EQ(m.config.impl, CudaGraphImpl::kFullIteration);
  EXPECT_TRUE(m.config.modules.empty());
  EXPECT_EQ(m.config.inference_scope, InferenceCudaGraphScope::kNone);
  ASSERT_EQ(m.issues.all().size(), 2u);
  EXPECT_EQ(m.issues.all()[0].rule, "M3");
  EXPECT_EQ(m.issues.all()[1].rule, "M5");
  EXPECT_EQ(m.issues.all()[1].message,
            "--cuda-graph-scope full_iteration is deprecated; using --cuda-graph-impl full_iteration");
}

TEST(CudaGraphConfigTest, NoneWithFullIterationMigratesToFullIterationImpl) {
  CudaGraphInputs in;
  in.modules = std::vector<std::string>{"full_iteration"};
  const Migrated m = migrate(in);
  EXPECT_EQ(m.config.impl, CudaGraphImpl::kFullIteration);
  EXPECT_EQ(single(m).message,
            "--cuda-graph-modules full_iteration is deprecated; using --cuda-graph-impl full_iteration");
}

TEST(CudaGraphConfigTest, EnableCudaGraphWithFullIterationScopeIsTheLegacyFullIteration) {
  CudaGraphInputs in;
  in.enable_cuda_graph = true;
  in.scope = std::vector<std::string>{"full_iteration"};
  const Migrated m = migrate(in);
  EXPECT_FALSE(m.issues.has_errors());
  EXPECT_EQ(m.config.impl, CudaGraphImpl::kFullIteration);
  ASSERT_EQ(m.issues.all().size(), 3u);
  EXPECT_EQ(m.issues.all()[0].rule, "M1");
  EXPECT_EQ(m.issues.all()[1].rule, "M3");
  EXPECT_EQ(m.issues.all()[2].rule, "M5");
}

TEST(CudaGraphConfigTest, LocalWithFullIterationInferenceMigratesToBlockScope) {
  CudaGraphInputs in;
  in.impl = "local";
  in.modules = std::vector<std::string>{"full_iteration_inference"};
  const Migrated m = migrate(in);
  EXPECT_EQ(m.config.impl, CudaGraphImpl::kLocal);
  EXPECT_EQ(m.config.inference_scope, InferenceCudaGraphScope::kBlock);
  EXPECT_TRUE(m.config.modules.empty());
  const ConfigIssue issue = single(m);
  EXPECT_EQ(issue.rule, "M6");
  EXPECT_EQ(issue.message,
            "--cuda-graph-modules full_iteration_inference is deprecated; using "
            "--inference-cuda-graph-scope block");
}

TEST(CudaGraphConfigTest, LocalWithModulesAndFullIterationInferenceKeepsTheModules) {
  CudaGraphInputs in;
  in.impl = "local";
  in.scope = std::vector<std::string>{"attn", "moe_router", "moe_preprocess", "full_iteration_inference"};
  const Migrated m = migrate(in);
  EXPECT_FALSE(m.issues.has_errors());
  EXPECT_EQ(m.config.modules,
            modules({CudaGraphModule::kAttn, CudaGraphModule::kMoeRouter, CudaGraphModule::kMoePreprocess}));
  EXPECT_EQ(m.config.inference_scope, InferenceCudaGraphScope::kBlock);
  ASSERT_EQ(m.issues.all().size(), 2u);
  EXPECT_EQ(m.issues.all()[0].message,
            "--cuda-graph-scope is deprecated; using --cuda-graph-modules attn "
            "moe_router moe_preprocess full_iteration_inference");
  EXPECT_EQ(m.issues.all()[1].rule, "M6");
}

TEST(CudaGraphConfigTest, NoneWithFullIterationInferenceIsANoOp) {
  CudaGraphInputs in;
  in.modules = std::vector<std::string>{"full_iteration_inference"};
  const Migrated m = migrate(in);
  EXPECT_EQ(m.config.impl, CudaGraphImpl::kNone);
  EXPECT_EQ(m.config.inference_scope, InferenceCudaGraphScope::kNone);
  const ConfigIssue issue = single(m);
  EXPECT_EQ(issue.rule, "M7");
  EXPECT_EQ(issue.severity, Severity::kWarning);
  EXPECT_EQ(issue.message,
            "--cuda-graph-modules full_iteration_inference has no effect with --cuda-graph-impl "
            "none; ignored");
}

TEST(CudaGraphConfigTest, ExplicitBlockScopeWithFullIterationInferenceIsAccepted) {
  CudaGraphInputs in;
  in.impl = "local";
  in.modules = std::vector<std::string>{"full_iteration_inference"};
  in.inference_scope = "block";
  const Migrated m = migrate(in);
  EXPECT_FALSE(m.issues.has_errors());
  EXPECT_EQ(m.config.inference_scope, InferenceCudaGraphScope::kBlock);
}

// ---- conflicts and normalization errors ----------------------------------------------------

TEST(CudaGraphConfigTest, EnableCudaGraphWithImplIsRejected) {
  CudaGraphInputs in;
  in.enable_cuda_graph = true;
  in.impl = "local";
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "TC-1");
  EXPECT_EQ(issue.severity, Severity::kError);
  EXPECT_EQ(issue.message,
            "--enable-cuda-graph cannot be combined with --cuda-graph-impl local; fix: drop "
            "--enable-cuda-graph, it is the deprecated spelling of --cuda-graph-impl local");
}

TEST(CudaGraphConfigTest, ExternalCudaGraphWithImplIsRejected) {
  CudaGraphInputs in;
  in.external_cuda_graph = true;
  in.impl = "full_iteration";
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "TC-1");
  EXPECT_EQ(issue.message,
            "--external-cuda-graph cannot be combined with --cuda-graph-impl full_iteration; fix: "
            "drop --external-cuda-graph, it is the deprecated spelling of --cuda-graph-impl "
            "transformer_engine");
}

TEST(CudaGraphConfigTest, BothBooleanFlagsAreRejected) {
  CudaGraphInputs in;
  in.enable_cuda_graph = true;
  in.external_cuda_graph = true;
  const Migrated m = migrate(in);
  const ConfigIssue issue = single(m);
  EXPECT_EQ(issue.rule, "TC-2");
  EXPECT_EQ(issue.message,
            "--enable-cuda-graph and --external-cuda-graph cannot both be set; fix: pass "
            "--cuda-graph-impl local or --cuda-graph-impl transformer_engine instead");
}

TEST(CudaGraphConfigTest, ScopeAndModulesTogetherAreRejected) {
  CudaGraphInputs in;
  in.impl = "transformer_engine";
  in.scope = std::vector<std::string>{"attn"};
  in.modules = std::vector<std::string>{"mlp"};
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "TC-3");
  EXPECT_EQ(issue.message,
            "--cuda-graph-scope and --cuda-graph-modules cannot be used together, got "
            "--cuda-graph-scope attn and --cuda-graph-modules mlp; fix: keep only "
            "--cuda-graph-modules");
}

TEST(CudaGraphConfigTest, ScopeWithModulesFullOrEmptyCountsAsUnset) {
  for (const auto& given : {std::vector<std::string>{"full"}, std::vector<std::string>{}}) {
    CudaGraphInputs in;
    in.impl = "transformer_engine";
    in.scope = std::vector<std::string>{"attn"};
    in.modules = given;
    const Migrated m = migrate(in);
    EXPECT_FALSE(m.issues.has_errors());
    EXPECT_EQ(m.config.modules, modules({CudaGraphModule::kAttn}));
  }
}

TEST(CudaGraphConfigTest, FullWithOtherModulesIsRejected) {
  CudaGraphInputs in;
  in.impl = "local";
  in.modules = std::vector<std::string>{"full", "attn"};
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "N1");
  EXPECT_EQ(issue.message,
            "full cannot be combined with other values in --cuda-graph-modules, got full attn; fix: "
            "omit --cuda-graph-modules to capture the whole layer, or list only the modules");
}

TEST(CudaGraphConfigTest, BothDeprecatedValuesAreRejected) {
  CudaGraphInputs in;
  in.impl = "local";
  in.modules = std::vector<std::string>{"full_iteration", "full_iteration_inference"};
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "N2");
  EXPECT_EQ(issue.message,
            "--cuda-graph-modules cannot contain both full_iteration and full_iteration_inference; "
            "fix: use --cuda-graph-impl full_iteration for training graphs or "
            "--inference-cuda-graph-scope block for inference graphs, not both");
}

TEST(CudaGraphConfigTest, FullIterationWithTransformerEngineIsRejected) {
  CudaGraphInputs in;
  in.impl = "transformer_engine";
  in.scope = std::vector<std::string>{"full_iteration"};
  const Migrated m = migrate(in);
  ASSERT_TRUE(m.issues.contains("N3"));
  EXPECT_EQ(m.issues.all().back().message,
            "--cuda-graph-scope full_iteration cannot be combined with --cuda-graph-impl transformer_engine; fix: "
            "use --cuda-graph-impl full_iteration and drop full_iteration from --cuda-graph-scope");
}

TEST(CudaGraphConfigTest, FullIterationWithInferenceScopeIsRejected) {
  CudaGraphInputs in;
  in.impl = "local";
  in.modules = std::vector<std::string>{"full_iteration"};
  in.inference_scope = "layer";
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "N4");
  EXPECT_EQ(issue.message,
            "--cuda-graph-modules full_iteration cannot be combined with --inference-cuda-graph-scope "
            "layer; fix: drop --inference-cuda-graph-scope (full_iteration makes no inference graphs)");
}

TEST(CudaGraphConfigTest, FullIterationWithInferenceScopeNoneIsAccepted) {
  CudaGraphInputs in;
  in.impl = "local";
  in.modules = std::vector<std::string>{"full_iteration"};
  in.inference_scope = "none";
  const Migrated m = migrate(in);
  EXPECT_FALSE(m.issues.has_errors());
  EXPECT_EQ(m.config.impl, CudaGraphImpl::kFullIteration);
}

TEST(CudaGraphConfigTest, FullIterationInferenceWithTransformerEngineIsRejected) {
  CudaGraphInputs in;
  in.impl = "transformer_engine";
  in.modules = std::vector<std::string>{"full_iteration_inference"};
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "N5");
  EXPECT_EQ(issue.message,
            "--cuda-graph-modules full_iteration_inference cannot be combined with --cuda-graph-impl "
            "transformer_engine; fix: use --cuda-graph-impl local --inference-cuda-graph-scope block");
}

TEST(CudaGraphConfigTest, FullIterationInferenceWithLayerScopeIsRejected) {
  CudaGraphInputs in;
  in.impl = "local";
  in.modules = std::vector<std::string>{"full_iteration_inference"};
  in.inference_scope = "layer";
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "N6");
  EXPECT_EQ(issue.message,
            "--cuda-graph-modules full_iteration_inference cannot be combined with "
            "--inference-cuda-graph-scope layer; fix: use --inference-cuda-graph-scope block and "
            "drop full_iteration_inference from --cuda-graph-modules");
}

TEST(CudaGraphConfigTest, UnknownModuleIsRejected) {
  CudaGraphInputs in;
  in.impl = "local";
  in.modules = std::vector<std::string>{"atn"};
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "N7");
  EXPECT_EQ(issue.message,
            "unknown value 'atn' in --cuda-graph-modules; fix: use one of attn, mlp, moe, moe_router, "
            "moe_preprocess, mamba (or omit --cuda-graph-modules for the whole layer)");
}

TEST(CudaGraphConfigTest, UnknownImplIsRejected) {
  CudaGraphInputs in;
  in.impl = "te";
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "TC-4");
  EXPECT_EQ(issue.message,
            "unknown --cuda-graph-impl 'te'; fix: use one of none, local, transformer_engine, "
            "full_iteration");
}

TEST(CudaGraphConfigTest, InferenceScopeMustSuitTheImpl) {
  struct Case {
    std::string impl;
    std::string scope;
    bool allowed;
  };
  const std::vector<Case> cases{{"none", "none", true},
                                {"none", "layer", false},
                                {"none", "block", false},
                                {"local", "none", false},
                                {"local", "layer", true},
                                {"local", "block", true},
                                {"transformer_engine", "none", true},
                                {"transformer_engine", "layer", false},
                                {"full_iteration", "none", true},
                                {"full_iteration", "block", false}};
  for (const auto& c : cases) {
    CudaGraphInputs in;
    in.impl = c.impl;
    in.inference_scope = c.scope;
    const Migrated m = migrate(in);
    EXPECT_EQ(m.issues.contains("TC-5"), !c.allowed) << c.impl << " + " << c.scope;
  }
  CudaGraphInputs in;
  in.impl = "transformer_engine";
  in.inference_scope = "block";
  EXPECT_EQ(single(migrate(in)).message,
            "--inference-cuda-graph-scope block is not supported with --cuda-graph-impl transformer_engine; fix: drop "
            "--inference-cuda-graph-scope (only --cuda-graph-impl local makes inference graphs)");
  in.impl = "local";
  in.inference_scope = "none";
  EXPECT_EQ(single(migrate(in)).message,
            "--inference-cuda-graph-scope none is not supported with --cuda-graph-impl "
            "local; fix: use layer (the default for local) or block");
}

TEST(CudaGraphConfigTest, FullIterationWithModulesIsRejected) {
  CudaGraphInputs in;
  in.impl = "full_iteration";
  in.modules = std::vector<std::string>{"attn", "mlp"};
  const ConfigIssue issue = single(migrate(in));
  EXPECT_EQ(issue.rule, "TC-6");
  EXPECT_EQ(issue.message,
            "--cuda-graph-modules must be empty with --cuda-graph-impl full_iteration, got attn mlp; "
            "fix: drop --cuda-graph-modules (the whole iteration is one graph)");
}

TEST(CudaGraphConfigTest, LegacyScopeWithModuleAndFullIterationHitsTheEmptyModulesRule) {
  CudaGraphInputs in;
  in.impl = "local";
  in.scope = std::vector<std::string>{"attn", "full_iteration"};
  const Migrated m = migrate(in);
  EXPECT_EQ(m.config.impl, CudaGraphImpl::kFullIteration);
  EXPECT_TRUE(m.issues.contains("TC-6"));
}

TEST(CudaGraphConfigTest, ModulesWithImplNoneAreKeptWithAWarning) {
  // Megatron's tests assert the list survives impl none ([attn] and [attn, mlp]); only a warning says
  // that nothing is graphed.
  CudaGraphInputs in;
  in.modules = std::vector<std::string>{"attn", "mlp"};
  const Migrated m = migrate(in);
  EXPECT_EQ(m.config.modules, modules({CudaGraphModule::kAttn, CudaGraphModule::kMlp}));
  const ConfigIssue issue = single(m);
  EXPECT_EQ(issue.rule, "BR-1");
  EXPECT_EQ(issue.severity, Severity::kWarning);
  EXPECT_EQ(issue.message,
            "--cuda-graph-modules attn mlp has no effect with --cuda-graph-impl none: nothing is "
            "graphed (the list is kept, as Megatron keeps it)");
}

TEST(CudaGraphConfigTest, DuplicateModulesAreMergedInOrder) {
  CudaGraphInputs in;
  in.impl = "transformer_engine";
  in.modules = std::vector<std::string>{"mlp", "attn", "mlp"};
  const Migrated m = migrate(in);
  EXPECT_TRUE(m.issues.all().empty());
  EXPECT_EQ(m.config.modules, modules({CudaGraphModule::kMlp, CudaGraphModule::kAttn}));
}

}  // namespace
}  // namespace graphed::config
