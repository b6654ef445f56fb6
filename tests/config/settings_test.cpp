// tests/config/settings_test.cpp — the settings table, value checks, JSON application and config
// files: unknown keys with suggestions, wrong types, atomic failure, exact messages.
#include "graphed/config/settings.h"

#include <cstdio>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "error_text.h"

#include "graphed/config/config_file.h"
#include "graphed/util/error.h"

namespace graphed::config {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& action) { return graphed::testing::error_text<ConfigError>(action); }

TEST(SettingsTest, KeysAreUniqueAndFlagsUseMegatronSpelling) {
  std::set<std::string> keys;
  for (const auto& spec : setting_specs()) {
    EXPECT_TRUE(keys.insert(spec.key).second) << spec.key;
    EXPECT_EQ(spec.flag().find('_'), std::string::npos) << spec.flag();
    EXPECT_TRUE(spec.assign && spec.read) << spec.key;
  }
  EXPECT_EQ(find_setting("--num-layers")->key, "num_layers");
  EXPECT_EQ(find_setting("num-layers")->key, "num_layers");
  EXPECT_EQ(find_setting("--cuda_graph_impl")->flag(), "--cuda-graph-impl");
  EXPECT_EQ(find_setting("no_such_setting"), nullptr);
}

TEST(SettingsTest, KindsFollowTheFieldTypes) {
  EXPECT_EQ(find_setting("num_layers")->kind, SettingKind::kInt);
  EXPECT_EQ(find_setting("lr")->kind, SettingKind::kFloat);
  EXPECT_EQ(find_setting("swiglu")->kind, SettingKind::kBool);
  EXPECT_EQ(find_setting("normalization")->kind, SettingKind::kChoice);
  EXPECT_EQ(find_setting("cuda_graph_modules")->kind, SettingKind::kChoiceList);
  EXPECT_EQ(find_setting("data_path")->kind, SettingKind::kString);
  EXPECT_TRUE(find_setting("num_experts")->optional);
  EXPECT_FALSE(find_setting("num_layers")->optional);
  EXPECT_TRUE(find_setting("enable_cuda_graph")->deprecated);
}

TEST(SettingsTest, TokensAreParsedAndCheckedWithTheFlagName) {
  const SettingSpec& layers = *find_setting("num_layers");
  EXPECT_EQ(parse_setting_tokens(layers, {"12"}, "--num-layers"), json(12));
  EXPECT_EQ(error_of([&] { parse_setting_tokens(layers, {"abc"}, "--num-layers"); }),
            "--num-layers expects an integer, got 'abc'; fix: give a whole number, such as --num-layers " +
                setting_value_text(layers.read(Settings{})));
  EXPECT_NE(error_of([&] {
              parse_setting_tokens(layers, {"1.5"}, "--num-layers");
            }).find("--num-layers expects an integer, got '1.5'; fix: "),
            std::string::npos);
  EXPECT_EQ(parse_setting_tokens(*find_setting("lr"), {"6e-4"}, "--lr"), json(6e-4));
  EXPECT_EQ(error_of([&] { parse_setting_tokens(*find_setting("lr"), {"fast"}, "--lr"); }),
            "--lr expects a number, got 'fast'; fix: give a number, such as --lr " +
                setting_value_text(find_setting("lr")->read(Settings{})));
  EXPECT_EQ(error_of([&] { parse_setting_tokens(*find_setting("bf16"), {"maybe"}, "--bf16"); }),
            "--bf16 expects true or false, got 'maybe'; fix: give true or false, or leave the value out (--bf16 turns "
            "it on, --no-bf16 off)");
  EXPECT_EQ(parse_setting_tokens(*find_setting("bf16"), {"false"}, "--bf16"), json(false));
}

/// A preset can set an optional number (--moe-expert-capacity-factor, say); none or null unsets it from the
/// command line, as leaving it out of a config file does.
TEST(SettingsTest, NoneUnsetsAnOptionalNumber) {
  const SettingSpec& capacity = *find_setting("moe_expert_capacity_factor");
  ASSERT_TRUE(capacity.optional);
  for (const std::string word : {"none", "None", "null"}) {
    EXPECT_TRUE(parse_setting_tokens(capacity, {word}, "--moe-expert-capacity-factor").is_null()) << word;
  }
  Settings settings;
  settings.model.moe_expert_capacity_factor = 1.0;
  apply_settings(settings, json{{"moe_expert_capacity_factor", parse_setting_tokens(capacity, {"none"}, "--x")}},
                 "command line");
  EXPECT_FALSE(settings.model.moe_expert_capacity_factor.has_value());
  EXPECT_EQ(error_of([&] { parse_setting_tokens(capacity, {"lots"}, "--moe-expert-capacity-factor"); }),
            "--moe-expert-capacity-factor expects a number, got 'lots'; fix: give a number, such as "
            "--moe-expert-capacity-factor 1, or none to unset it");
  EXPECT_NE(error_of([&] {
              parse_setting_tokens(*find_setting("num_layers"), {"none"}, "--num-layers");
            }).find("expects an integer, got 'none'"),
            std::string::npos)
      << "a setting with no unset state takes no none";
}

/// Every value of the wrong kind, from a flag or a file, says what to give instead.
TEST(SettingsTest, EveryWrongValueEndsWithAFix) {
  for (const auto& spec : setting_specs()) {
    const std::string flag_error = error_of([&] { parse_setting_tokens(spec, {"a", "b"}, spec.flag()); });
    if (flag_error != "(no error)") EXPECT_NE(flag_error.find("; fix: "), std::string::npos) << flag_error;
    for (const json& value : {json::object(), json::array({json::object()})}) {
      const std::string file_error = error_of([&] { check_setting_value(spec, value, spec.key + " in a.json"); });
      EXPECT_NE(file_error.find("; fix: "), std::string::npos) << file_error;
    }
    if (spec.kind == SettingKind::kInt || spec.kind == SettingKind::kFloat || spec.kind == SettingKind::kBool) {
      const std::string token_error = error_of([&] { parse_setting_tokens(spec, {"x y"}, spec.flag()); });
      EXPECT_NE(token_error.find("; fix: "), std::string::npos) << token_error;
    }
  }
}

TEST(SettingsTest, ListsAcceptSpacesAndCommas) {
  const SettingSpec& modules = *find_setting("cuda_graph_modules");
  const json expected = json(std::vector<std::string>{"attn", "moe_router", "moe_preprocess"});
  EXPECT_EQ(parse_setting_tokens(modules, {"attn,moe_router,moe_preprocess"}, "--cuda-graph-modules"), expected);
  EXPECT_EQ(parse_setting_tokens(modules, {"attn", "moe_router", "moe_preprocess"}, "--cuda-graph-modules"), expected);
  EXPECT_EQ(parse_setting_tokens(modules, {"attn,moe_router", "moe_preprocess"}, "--cuda-graph-modules"), expected);
}

TEST(SettingsTest, UnknownChoicesListTheValidValuesAndTheNearest) {
  EXPECT_EQ(error_of([] { parse_setting_tokens(*find_setting("cuda_graph_impl"), {"locl"}, "--cuda-graph-impl"); }),
            "unknown value 'locl' for --cuda-graph-impl (did you mean local?); fix: use one of none, local, "
            "transformer_engine, full_iteration");
  EXPECT_EQ(
      error_of([] { parse_setting_tokens(*find_setting("cuda_graph_modules"), {"attn,xyz"}, "--cuda-graph-modules"); }),
      "unknown value 'xyz' for --cuda-graph-modules; fix: use one of attn, mlp, moe, moe_router, moe_preprocess, "
      "mamba, full, full_iteration, full_iteration_inference");
  EXPECT_EQ(error_of([] { parse_setting_tokens(*find_setting("normalization"), {"RMSnorm"}, "--normalization"); }),
            "unknown value 'RMSnorm' for --normalization (did you mean RMSNorm?); fix: use one of LayerNorm, RMSNorm");
}

TEST(SettingsTest, JsonValuesAreTypeChecked) {
  Settings settings;
  EXPECT_EQ(error_of([&] {
              apply_settings(settings, json{{"num_layers", "4"}}, "--config run.json");
            }),
            "num_layers in --config run.json expects an integer, got \"4\"; fix: write a JSON integer without quotes, "
            "such as \"num_layers\": " +
                setting_value_text(find_setting("num_layers")->read(Settings{})));
  EXPECT_EQ(error_of([&] {
              apply_settings(settings, json{{"bf16", 1}}, "--config run.json");
            }),
            "bf16 in --config run.json expects true or false, got 1; fix: write true or false without quotes, such as "
            "\"bf16\": true");
  EXPECT_EQ(error_of([&] {
              apply_settings(settings, json{{"num_layers", nullptr}}, "--config run.json");
            }),
            "num_layers in --config run.json cannot be null (it has no unset state); fix: give a value or leave "
            "the key out");
  EXPECT_EQ(error_of([&] { apply_settings(settings, json::array(), "--config run.json"); }),
            "--config run.json must be a JSON object of settings, got []; fix: write a JSON object of settings, such "
            "as {\"num_layers\": 4}");
}

TEST(SettingsTest, JsonAcceptsDashKeysListsCommaStringsAndNullForOptional) {
  Settings settings;
  settings.model.num_experts = 4;
  apply_settings(settings,
                 json{{"num-layers", 6}, {"lr", 1}, {"cuda_graph_modules", "attn,mlp"}, {"num_experts", nullptr}},
                 "test");
  EXPECT_EQ(settings.model.num_layers, 6);
  EXPECT_DOUBLE_EQ(settings.train.lr, 1.0);
  EXPECT_EQ(settings.cuda_graph.modules, (std::vector<std::string>{"attn", "mlp"}));
  EXPECT_FALSE(settings.model.num_experts.has_value());
}

TEST(SettingsTest, UnknownKeysSuggestTheNearestAndNothingIsApplied) {
  Settings settings;
  try {
    apply_settings(settings, json{{"num_layer", 4}, {"hidden_size", 64}, {"lr", "x"}}, "--config run.json");
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    ASSERT_EQ(error.details().size(), 2u);
    // Keys are visited in JSON object (sorted) order.
    EXPECT_EQ(
        error.details()[0].rfind("lr in --config run.json expects a number, got \"x\"; fix: write a JSON number", 0),
        0u);
    EXPECT_EQ(error.details()[1],
              "unknown setting 'num_layer' in --config run.json (did you mean num_layers?); "
              "fix: see `graphed check-config --help` for the valid settings");
    EXPECT_STREQ(error.what(), "2 problems in --config run.json");
  }
  EXPECT_EQ(settings.model.hidden_size, 128) << "a failed apply must change nothing";
}

TEST(SettingsTest, OriginsRecordTheSource) {
  Settings settings;
  SettingOrigins origins;
  apply_settings(settings, json{{"num_layers", 4}}, "preset small", &origins);
  apply_settings(settings, json{{"num_layers", 8}}, "command line", &origins);
  EXPECT_EQ(origins.at("num_layers"), "command line");
  EXPECT_EQ(settings.model.num_layers, 8);
}

TEST(SettingsTest, SettingsRoundTripThroughJson) {
  Settings settings;
  settings.model.num_experts = 8;
  settings.cuda_graph.modules = std::vector<std::string>{"attn"};
  const json dumped = settings_to_json(settings);
  Settings copy;
  apply_settings(copy, dumped, "round trip");
  EXPECT_EQ(settings_to_json(copy), dumped);
  EXPECT_TRUE(dumped.at("num_query_groups").is_null());
}

class ConfigFileTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(ConfigFileTest, ReadsAnObject) {
  const std::string path = write("good.json", R"({"num_layers": 3, "cuda-graph-impl": "local"})");
  const json object = read_config_file(path);
  EXPECT_EQ(object.at("num_layers"), 3);
}

TEST_F(ConfigFileTest, MissingFileIsNamed) {
  EXPECT_EQ(error_of([] { read_config_file("/nonexistent/run.json"); }),
            "cannot read --config file '/nonexistent/run.json': No such file or directory; fix: pass the path of an "
            "existing JSON file");
}

TEST_F(ConfigFileTest, InvalidJsonIsNamed) {
  const std::string path = write("bad.json", "{\"num_layers\": 3,");
  const std::string message = error_of([&] { read_config_file(path); });
  EXPECT_EQ(message,
            "--config file '" + path +
                "' is not valid JSON: parse error at line 1, column 18: syntax error "
                "while parsing object key - unexpected end of input; expected string literal; fix: write a JSON "
                "object of finite numbers, strings and lists, such as {\"num_layers\": 4}");
}

TEST_F(ConfigFileTest, NumberBeyondADoubleIsNamedWithoutTheLibraryTag) {
  const std::string path = write("huge.json", R"({"lr": 1e999})");
  EXPECT_EQ(error_of([&] { read_config_file(path); }),
            "--config file '" + path +
                "' is not valid JSON: number overflow parsing '1e999'; fix: write a JSON "
                "object of finite numbers, strings and lists, such as {\"num_layers\": 4}");
}

TEST(SettingsJsonTest, MoeLayerFreqTakesAnIntegerOrAListAsMegatronDoes) {
  Settings settings;
  apply_settings(settings, json{{"moe_layer_freq", 2}}, "--config run.json");
  EXPECT_EQ(settings.model.moe_layer_freq, "2");
  apply_settings(settings, json{{"moe_layer_freq", json::array({1, 0, 1, 0})}}, "--config run.json");
  EXPECT_EQ(settings.model.moe_layer_freq, "1,0,1,0");
  apply_settings(settings, json{{"moe_layer_freq", "1,1"}}, "--config run.json");
  EXPECT_EQ(settings.model.moe_layer_freq, "1,1");
  EXPECT_EQ(error_of([&] {
              apply_settings(settings, json{{"moe_layer_freq", 1.5}}, "--config run.json");
            }),
            "moe_layer_freq in --config run.json expects a string, got 1.5; fix: write a quoted JSON string");
}

TEST_F(ConfigFileTest, NonObjectIsRejected) {
  const std::string path = write("list.json", "[1, 2]");
  EXPECT_EQ(error_of([&] { read_config_file(path); }),
            "--config file '" + path +
                "' must hold a JSON object of settings, got array; fix: write "
                "{\"num_layers\": 4, ...}");
}

}  // namespace
}  // namespace graphed::config
