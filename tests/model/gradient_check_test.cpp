// tests/model/gradient_check_test.cpp — every block's analytic gradients against central finite
// differences in double precision on tiny shapes: norms, MLP (GELU and SwiGLU), attention (MHA, GQA,
// RoPE), the Mamba-2 mixer, the MoE MLP (drop-and-pad and dropless), a transformer layer and the whole GPT loss.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <functional>

#include "graphed/model/attention.h"
#include "graphed/model/gpt_model.h"
#include "graphed/model/mamba_mixer.h"
#include "graphed/model/mlp.h"
#include "graphed/model/moe.h"
#include "graphed/model/norm.h"
#include "graphed/model/transformer_layer.h"
#include "run_config_for_test.h"

namespace graphed::model {
namespace {

/// Compares d(loss)/d(tensor) with central differences at a few entries of each tensor.
void check_gradients(const std::function<at::Tensor()>& loss, const std::vector<at::Tensor>& tensors,
                     const std::string& what) {
  for (const auto& tensor : tensors) {
    if (tensor.grad().defined()) tensor.mutable_grad().zero_();
  }
  const at::Tensor value = loss();
  const auto analytic = torch::autograd::grad({value}, tensors, {}, /*retain_graph=*/false, /*create_graph=*/false,
                                              /*allow_unused=*/true);
  const double step = 1e-6;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const at::Tensor flat = tensors[t].detach().view({-1});
    const int64_t n = flat.numel();
    for (const int64_t index : {int64_t{0}, n / 3, n / 2, n - 1}) {
      const double original = flat[index].item<double>();
      flat[index].fill_(original + step);
      const double up = loss().item<double>();
      flat[index].fill_(original - step);
      const double down = loss().item<double>();
      flat[index].fill_(original);
      const double numeric = (up - down) / (2 * step);
      const double exact = analytic[t].defined() ? analytic[t].view({-1})[index].item<double>() : 0.0;
      EXPECT_NEAR(exact, numeric, 1e-6 + 1e-5 * std::abs(numeric)) << what << ": tensor " << t << " entry " << index;
    }
  }
}

std::vector<at::Tensor> parameters_of(torch::nn::Module& module) { return module.parameters(); }

class GradientCheckTest : public ::testing::Test {
 protected:
  void SetUp() override { at::manual_seed(7); }
  at::Tensor input(std::vector<int64_t> shape) { return at::randn(shape, at::kDouble).requires_grad_(true); }
};

TEST_F(GradientCheckTest, LayerNormAndRmsNorm) {
  for (const bool rms : {false, true}) {
    Norm norm(6, rms, 1e-5);
    norm->to(at::kDouble);
    const at::Tensor x = input({3, 6});
    const at::Tensor target = at::randn({3, 6}, at::kDouble);
    auto tensors = parameters_of(*norm);
    tensors.push_back(x);
    check_gradients([&] { return (norm->forward(x) * target).sum(); }, tensors, rms ? "RMSNorm" : "LayerNorm");
  }
}

TEST_F(GradientCheckTest, MambaMixer) {
  MambaShape shape;
  shape.hidden_size = 8;
  shape.state_size = 4;
  shape.head_dim = 4;
  shape.num_groups = 2;
  shape.chunk_size = 3;  // a length of 7: three chunks, the last padded
  shape.init_std = 0.3;
  shape.output_init_std = 0.3;
  MambaMixer mixer(shape);
  mixer->to(at::kDouble);
  const at::Tensor x = input({2, 7, 8});
  auto tensors = parameters_of(*mixer);
  tensors.push_back(x);
  check_gradients([&] { return mixer->forward(x).pow(2).sum(); }, tensors, "Mamba-2 mixer");
}

TEST_F(GradientCheckTest, MlpGeluAndSwiglu) {
  struct Case {
    bool swiglu;
    bool openai_gelu;
    const char* name;
  };
  for (const Case c :
       {Case{false, false, "GELU MLP"}, Case{false, true, "tanh GELU MLP"}, Case{true, false, "SwiGLU MLP"}}) {
    Mlp mlp(MlpShape{8, 12, c.swiglu, true, 0.2, 0.2, c.openai_gelu});
    mlp->to(at::kDouble);
    const at::Tensor x = input({2, 3, 8});
    auto tensors = parameters_of(*mlp);
    tensors.push_back(x);
    check_gradients([&] { return mlp->forward(x).pow(2).sum(); }, tensors, c.name);
  }
}

TEST_F(GradientCheckTest, AttentionMhaGqaRope) {
  // qwen: the Hugging Face features together: q/k RMSNorm, QKV-only bias, head size 6 (not 16 / 4),
  // Llama 3.1 RoPE scaling.
  struct Case {
    int64_t groups;
    bool rope;
    bool qwen;
  };
  for (const Case c : {Case{4, false, false}, Case{2, true, false}, Case{1, false, false}, Case{2, true, true}}) {
    AttentionShape shape;
    shape.hidden_size = 16;
    shape.num_heads = 4;
    shape.num_query_groups = c.groups;
    shape.max_sequence = 5;
    shape.rope = c.rope;
    shape.init_std = 0.3;
    shape.output_init_std = 0.3;
    if (c.qwen) {
      shape.head_dim = 6;
      shape.bias = false;
      shape.qkv_bias = true;
      shape.qk_norm = true;
      shape.rms_norm = true;
      shape.rope_scaling = true;
      shape.rope_scaling_options = {8.0, 1.0, 4.0, 16};
    }
    Attention attention(shape);
    attention->to(at::kDouble);
    const at::Tensor x = input({2, 5, 16});
    auto tensors = parameters_of(*attention);
    tensors.push_back(x);
    check_gradients([&] { return attention->forward(x).pow(2).sum(); }, tensors,
                    "attention groups=" + std::to_string(c.groups) + (c.rope ? " rope" : "") + (c.qwen ? " qwen" : ""));
  }
}

TEST_F(GradientCheckTest, MoeDropAndPadAndDropless) {
  for (const bool padded : {true, false}) {
    MoeShape shape;
    shape.hidden_size = 8;
    shape.num_experts = 4;
    shape.top_k = 2;
    shape.expert_ffn_hidden_size = 6;
    shape.shared_expert_size = 5;
    shape.aux_loss_coeff = 0.1;
    shape.init_std = 0.3;
    shape.output_init_std = 0.3;
    if (padded) {
      shape.capacity_factor = 1.0;  // some assignments are dropped: the check covers dropping too
      shape.pad_to_capacity = true;
    }
    Moe moe(shape);
    moe->to(at::kDouble);
    const at::Tensor x = input({6, 8});
    auto tensors = parameters_of(*moe);
    tensors.push_back(x);
    check_gradients(
        [&] {
          auto [output, aux] = moe->forward(x);
          return output.pow(2).sum() + aux;
        },
        tensors, padded ? "MoE drop-and-pad" : "MoE dropless");
  }
}

TEST_F(GradientCheckTest, GptLossDenseAndMoe) {
  for (const bool moe : {false, true}) {
    nlohmann::json settings{{"num_layers", 2},       {"hidden_size", 8},      {"num_attention_heads", 2},
                            {"seq_length", 4},       {"vocab_size", 11},      {"attention_dropout", 0.0},
                            {"hidden_dropout", 0.0}, {"init_method_std", 0.3}};
    if (moe)
      settings.update({{"num_experts", 3},
                       {"moe_expert_capacity_factor", 1.5},
                       {"moe_pad_expert_input_to_capacity", true},
                       {"moe_layer_freq", "0,1"},
                       {"normalization", "RMSNorm"},
                       {"swiglu", true},
                       {"ffn_hidden_size", 12},
                       {"position_embedding_type", "rope"},
                       {"moe_aux_loss_coeff", 0.01}});
    const config::RunConfig config = graphed::testing::run_config(settings);
    GptModel gpt(config.model, config.moe_layers);
    gpt->to(at::kDouble);
    const at::Tensor tokens = at::randint(11, {2, 4}, at::kLong);
    const at::Tensor labels = at::randint(11, {2, 4}, at::kLong);
    check_gradients([&] { return gpt->forward(tokens, labels, 0).loss; }, gpt->parameters(),
                    moe ? "GPT with MoE" : "GPT");
  }
}

}  // namespace
}  // namespace graphed::model
