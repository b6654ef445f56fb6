// tests/infer/sampler_test.cpp — device-side sampling: greedy is argmax, the hashed noise is
// deterministic and uniform and unrelated between nearby seeds, top-k and top-p keep only the tokens
// they should, and ids past the tokenizer's vocabulary are never drawn.
#include "graphed/infer/sampler.h"

#include "graphed/util/compat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

namespace graphed::infer {
namespace {

at::Tensor step_tensor(int64_t step) { return at::full({1}, step, at::kLong); }

/// What the sampler computed before its draw became one pass (kernels/sampling_ops.h), in tensor ops: the
/// filters as masks, the noise of hashed_uniform materialized, argmax of the sum. The pass must match it.
at::Tensor reference_draw(const at::Tensor& logits, const SamplingOptions& options, int64_t step) {
  const double infinity = std::numeric_limits<double>::infinity();
  at::Tensor scaled = logits / options.temperature;
  if (options.top_k > 0 && options.top_k < scaled.size(1)) {
    const at::Tensor kth = std::get<0>(scaled.topk(options.top_k, -1)).narrow(-1, options.top_k - 1, 1);
    scaled = scaled.masked_fill(scaled < kth, -infinity);
  }
  if (options.top_p < 1.0) {
    const auto [sorted, order] = scaled.sort(-1, /*descending=*/true);
    const at::Tensor probabilities = at::softmax(sorted, -1);
    const at::Tensor before = probabilities.cumsum(-1) - probabilities;
    scaled =
        scaled.masked_fill(at::zeros_like(before, at::kBool).scatter(-1, order, before > options.top_p), -infinity);
  }
  const at::Tensor uniform = hashed_uniform(logits.size(0), logits.size(1), options.seed, step_tensor(step));
  return (scaled + at::neg(at::log(at::neg(at::log(uniform)))).to(at::kFloat)).argmax(-1);
}

TEST(Sampler, GreedyIsArgmax) {
  const at::Tensor logits = at::tensor({0.1f, 2.0f, -1.0f, 1.9f, 0.0f, 3.0f}, at::kFloat).view({2, 3});
  const at::Tensor tokens = sample_tokens(logits, SamplingOptions{}, step_tensor(0));
  EXPECT_EQ(tokens[0].item<int64_t>(), 1);
  EXPECT_EQ(tokens[1].item<int64_t>(), 2);
}

TEST(Sampler, NoiseIsDeterministicAndUniform) {
  const at::Tensor a = hashed_uniform(4, 5000, 7, step_tensor(3));
  const at::Tensor b = hashed_uniform(4, 5000, 7, step_tensor(3));
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, hashed_uniform(4, 5000, 8, step_tensor(3))));
  EXPECT_FALSE(at::equal(a, hashed_uniform(4, 5000, 7, step_tensor(4))));
  EXPECT_GT(a.min().item<double>(), 0.0);
  EXPECT_LT(a.max().item<double>(), 1.0);
  EXPECT_NEAR(a.mean().item<double>(), 0.5, 0.01);
  EXPECT_NEAR(a.var().item<double>(), 1.0 / 12.0, 0.003);
  // Rows differ from each other.
  EXPECT_FALSE(at::equal(a[0], a[1]));
}

TEST(Sampler, TemperatureFollowsTheProbabilities) {
  // Two tokens with probabilities 0.8 / 0.2 at temperature 1: over many steps the first wins ~80%.
  const at::Tensor logits = at::log(at::tensor({0.8f, 0.2f}, at::kFloat)).view({1, 2});
  SamplingOptions options;
  options.temperature = 1.0;
  options.seed = 11;
  int64_t first = 0;
  const int64_t draws = 4000;
  for (int64_t step = 0; step < draws; ++step)
    first += sample_tokens(logits, options, step_tensor(step)).item<int64_t>() == 0;
  EXPECT_NEAR(static_cast<double>(first) / draws, 0.8, 0.03);
}

TEST(Sampler, TopKAndTopPKeepOnlyTheLikeliest) {
  const at::Tensor logits = at::log(at::tensor({0.05f, 0.4f, 0.3f, 0.15f, 0.1f}, at::kFloat)).view({1, 5});
  SamplingOptions top_k;
  top_k.temperature = 1.0;
  top_k.top_k = 2;
  SamplingOptions top_p;
  top_p.temperature = 1.0;
  top_p.top_p = 0.75;  // 0.4 + 0.3 = 0.7 < 0.75, so 0.15 joins; 0.1 and 0.05 never
  std::set<int64_t> from_k, from_p;
  for (int64_t step = 0; step < 400; ++step) {
    from_k.insert(sample_tokens(logits, top_k, step_tensor(step)).item<int64_t>());
    from_p.insert(sample_tokens(logits, top_p, step_tensor(step)).item<int64_t>());
  }
  EXPECT_EQ(from_k, (std::set<int64_t>{1, 2}));
  EXPECT_EQ(from_p, (std::set<int64_t>{1, 2, 3}));
}

/// The draw looks at the noise only where it can matter; it must still be exactly the argmax over every
/// column, with and without the filters, at temperatures that flatten and sharpen the logits.
TEST(Sampler, TheDrawIsTheArgmaxOfTheTemperedLogitsPlusTheWholeNoise) {
  at::manual_seed(3);
  for (const double spread : {0.01, 1.0, 6.0}) {  // nearly flat logits, a language model's, a peaked one
    const at::Tensor logits = at::randn({6, 3000}) * spread;
    for (const double temperature : {0.3, 1.0, 2.0}) {
      SamplingOptions options;
      options.temperature = temperature;
      options.seed = 17;
      for (int64_t step = 0; step < 12; ++step) {
        options.top_k = step % 3 == 1 ? 40 : 0;
        options.top_p = step % 4 == 2 ? 0.8 : 1.0;
        EXPECT_TRUE(at::equal(sample_tokens(logits, options, step_tensor(step)), reference_draw(logits, options, step)))
            << "spread " << spread << ", temperature " << temperature << ", step " << step;
      }
    }
  }
}

/// top-p cuts by position, as transformers and vLLM do, with ties in column order: of four tokens tied at 0.15
/// after one of 0.4, top-p 0.6 keeps the 0.4 and the first two of the tie (0.4 + 0.15 = 0.55 before the second),
/// not the whole tie (bf16 logits tie often, and keeping every tied token would keep far more than 0.6).
TEST(Sampler, TopPCutsATieByPosition) {
  const at::Tensor logits = at::log(at::tensor({0.15f, 0.4f, 0.15f, 0.15f, 0.15f}, at::kFloat)).view({1, 5});
  SamplingOptions options;
  options.temperature = 1.0;
  options.top_p = 0.6;
  std::set<int64_t> drawn;
  for (int64_t step = 0; step < 400; ++step)
    drawn.insert(sample_tokens(logits, options, step_tensor(step)).item<int64_t>());
  EXPECT_EQ(drawn, (std::set<int64_t>{0, 1, 2}));
  options.top_p = 1.0;
  options.top_k = 2;  // top-k keeps every token tied with the k-th
  drawn.clear();
  for (int64_t step = 0; step < 400; ++step)
    drawn.insert(sample_tokens(logits, options, step_tensor(step)).item<int64_t>());
  EXPECT_EQ(drawn, (std::set<int64_t>{0, 1, 2, 3, 4}));
}

/// A NaN logit wins, the first one, in greedy and sampled rows alike (as argmax takes it), whatever shares the step.
TEST(Sampler, ANanLogitIsDrawnAsArgmaxWouldTakeIt) {
  at::Tensor logits = at::randn({2, 300});
  logits.index_put_({at::indexing::Slice(), 40}, NAN);
  logits.index_put_({at::indexing::Slice(), 7}, NAN);
  const auto longs = at::TensorOptions().dtype(at::kLong);
  const SamplingRows rows{at::tensor({0.0, 1.0}, at::kDouble), at::zeros({2}, longs),
                          at::tensor({1.0, 0.5}, at::kDouble), at::arange(2, longs), at::zeros({2}, longs)};
  for (const SamplingMode mode : {SamplingMode::kGreedy, SamplingMode::kTemperature, SamplingMode::kFiltered}) {
    EXPECT_TRUE(at::equal(sample_rows(logits, rows, mode, 0), at::full({2}, 7, longs))) << static_cast<int>(mode);
  }
}

/// Zero logits: the draw is the column of the largest noise, hashed_uniform's argmax.
TEST(Sampler, FlatLogitsDrawTheLargestNoise) {
  SamplingOptions options;
  options.temperature = 1.0;
  options.seed = 99;
  for (int64_t step = 0; step < 5; ++step) {
    EXPECT_TRUE(at::equal(sample_tokens(at::zeros({4, 5000}), options, step_tensor(step)),
                          hashed_uniform(4, 5000, 99, step_tensor(step)).argmax(-1)));
  }
}

/// A sampled step allocates no tensor the size of the vocabulary, top-p included: 50 requests over 50,257 ids once
/// built int64 and float64 noise tensors of 20 MB each (and top-p a sort of them all), and a CPU server spent its
/// time in page faults.
TEST(Sampler, ASampledStepAllocatesNothingTheSizeOfTheVocabulary) {
  const at::Tensor logits = at::randn({50, 50257});
  const auto options = at::TensorOptions().dtype(at::kLong);
  SamplingRows rows{at::full({50}, 1.0, at::kDouble), at::zeros({50}, options), at::ones({50}, at::kDouble),
                    at::arange(50, options), at::full({50}, 3, options)};
  at::Tensor out = at::empty({50}, options);
  rows.top_p.narrow(0, 0, 25).fill_(0.9);                           // half the requests also filter
  sample_rows_into(logits, rows, SamplingMode::kFiltered, 0, out);  // warm: nothing is allocated lazily later
  for (const SamplingMode mode : {SamplingMode::kGreedy, SamplingMode::kTemperature, SamplingMode::kFiltered}) {
    const compat::CountedCpuAllocations counted;
    for (int step = 0; step < 3; ++step) {
      rows.draw.add_(1);
      sample_rows_into(logits, rows, mode, 50000, out);
    }
    EXPECT_LT(counted.bytes(), 64u * 1024u) << "mode " << static_cast<int>(mode);  // a row of logits is 200 KB
  }
}

/// The serving step's form writes the tokens where it is told (a static buffer), whatever the mode.
TEST(Sampler, RowsAreDrawnIntoTheGivenBuffer) {
  const at::Tensor logits = at::randn({3, 700});
  SamplingRows rows{at::tensor({0.0, 1.0, 0.8}, at::kDouble), at::tensor(std::vector<int64_t>{0, 0, 5}, at::kLong),
                    at::tensor({1.0, 1.0, 0.9}, at::kDouble), at::tensor(std::vector<int64_t>{7, 8, 9}, at::kLong),
                    at::tensor(std::vector<int64_t>{0, 1, 2}, at::kLong)};
  at::Tensor buffer = at::full({5}, -1, at::kLong);
  for (const SamplingMode mode : {SamplingMode::kGreedy, SamplingMode::kTemperature, SamplingMode::kFiltered}) {
    at::Tensor out = buffer.narrow(0, 0, 3);
    sample_rows_into(logits, rows, mode, 0, out);
    EXPECT_EQ(out.data_ptr(), buffer.data_ptr());
    EXPECT_TRUE(at::equal(out, sample_rows(logits, rows, mode, 0)));
    EXPECT_EQ(buffer[3].item<int64_t>(), -1);
    EXPECT_EQ(out[0].item<int64_t>(), logits[0].argmax().item<int64_t>());  // the greedy row
  }
}

double correlation(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.flatten() - a.mean();
  const at::Tensor y = b.flatten() - b.mean();
  return ((x * y).sum() / (x.norm() * y.norm())).item<double>();
}

TEST(Sampler, NearbySeedsStepsAndRowsGiveUnrelatedNoise) {
  // The hash once added seed and step, so seed s + 1 at step t replayed seed s at step t + 1: seeds 21
  // and 22 continued a prompt with the same text one token apart. 4 x 5000 draws: |r| of unrelated
  // noise stays below 0.03 (more than 4 standard deviations).
  for (const uint64_t seed : {0ULL, 21ULL, 500ULL, (1ULL << 32) - 1}) {
    for (int64_t step = 0; step < 4; ++step) {
      const at::Tensor noise = hashed_uniform(4, 5000, seed, step_tensor(step));
      EXPECT_LT(std::abs(correlation(noise, hashed_uniform(4, 5000, seed + 1, step_tensor(step)))), 0.03) << seed;
      EXPECT_LT(std::abs(correlation(noise, hashed_uniform(4, 5000, seed + 1, step_tensor(step - 1)))), 0.03) << seed;
      EXPECT_LT(std::abs(correlation(noise, hashed_uniform(4, 5000, seed, step_tensor(step + 1)))), 0.03) << seed;
      EXPECT_LT(std::abs(correlation(noise[0], noise[1])), 0.05) << seed;
    }
  }
  // The seed's high half counts too.
  EXPECT_LT(std::abs(correlation(hashed_uniform(4, 5000, 7, step_tensor(0)),
                                 hashed_uniform(4, 5000, 7 + (1ULL << 32), step_tensor(0)))),
            0.03);
}

TEST(Sampler, AdjacentSeedsDrawDifferentText) {
  // 256 equally likely tokens: two unrelated draws agree 1 time in 256, so 96 steps of two adjacent
  // seeds agree about 0.4 times, aligned or one step apart; 8 would be a 1-in-10^9 event.
  const at::Tensor logits = at::zeros({1, 256});
  SamplingOptions options;
  options.temperature = 1.0;
  for (const uint64_t seed : {21ULL, 500ULL}) {
    std::vector<int64_t> first, second;
    for (int64_t step = 0; step < 97; ++step) {
      options.seed = seed;
      first.push_back(sample_tokens(logits, options, step_tensor(step)).item<int64_t>());
      options.seed = seed + 1;
      second.push_back(sample_tokens(logits, options, step_tensor(step)).item<int64_t>());
    }
    int64_t aligned = 0, shifted = 0;
    for (std::size_t i = 0; i + 1 < first.size(); ++i) {
      aligned += first[i] == second[i];
      shifted += first[i + 1] == second[i];
    }
    EXPECT_LT(aligned, 8) << "seeds " << seed << " and " << seed + 1;
    EXPECT_LT(shifted, 8) << "seeds " << seed << " and " << seed + 1;
  }
}

TEST(Sampler, IdsPastTheVocabularyAreNeverDrawn) {
  // A model of 1024 ids read through a 256-id tokenizer: the padded ids are the likeliest here, and
  // still never come out, greedy or sampled, with or without top-k and top-p.
  at::Tensor logits = at::randn({4, 1024});
  logits.narrow(1, 256, 768).add_(5.0);
  SamplingOptions options;
  options.vocabulary = 256;
  EXPECT_LT(sample_tokens(logits, options, step_tensor(0)).max().item<int64_t>(), 256);
  EXPECT_TRUE(at::equal(sample_tokens(logits, options, step_tensor(0)), logits.narrow(1, 0, 256).argmax(-1)));
  for (const double temperature : {0.7, 1.0, 1.5}) {
    options.temperature = temperature;
    for (int64_t step = 0; step < 50; ++step) {
      options.top_k = step % 3 == 0 ? 600 : 0;
      options.top_p = step % 2 == 0 ? 0.99 : 1.0;
      const at::Tensor tokens = sample_tokens(logits, options, step_tensor(step));
      EXPECT_GE(tokens.min().item<int64_t>(), 0);
      EXPECT_LT(tokens.max().item<int64_t>(), 256) << "temperature " << temperature << ", step " << step;
    }
  }
  // Without the limit the padded ids win.
  EXPECT_GE(sample_tokens(logits, SamplingOptions{}, step_tensor(0)).min().item<int64_t>(), 256);
}

TEST(Sampler, SameSeedSameTokens) {
  const at::Tensor logits = at::randn({3, 50});
  SamplingOptions options;
  options.temperature = 0.9;
  options.top_k = 20;
  options.top_p = 0.95;
  options.seed = 5;
  EXPECT_TRUE(
      at::equal(sample_tokens(logits, options, step_tensor(2)), sample_tokens(logits, options, step_tensor(2))));
}

/// Per-request rows: each row draws what sample_tokens draws for its own settings at row 0, and a row's
/// draw does not change when another row needs the top-k / top-p filters (the step's mode).
TEST(Sampler, EachRowDrawsByItsOwnSettingsWhateverTheStepsMode) {
  at::manual_seed(9);
  const at::Tensor logits = at::randn({4, 1000}) * 3.0;
  std::vector<SamplingOptions> settings(4);
  settings[0].temperature = 0.0;  // greedy
  settings[1].temperature = 1.0;  // temperature only
  settings[2].temperature = 0.7, settings[2].top_k = 20;
  settings[3].temperature = 1.3, settings[3].top_p = 0.8;
  SamplingRows rows;
  std::vector<double> temperature, top_p;
  std::vector<int64_t> top_k, seeds, draws;
  for (std::size_t i = 0; i < settings.size(); ++i) {
    settings[i].seed = 40 + i;
    temperature.push_back(settings[i].temperature);
    top_k.push_back(settings[i].top_k);
    top_p.push_back(settings[i].top_p);
    seeds.push_back(static_cast<int64_t>(seed_state(settings[i].seed)));
    draws.push_back(static_cast<int64_t>(3 + i));
  }
  rows.temperature = at::tensor(temperature, at::kDouble);
  rows.top_k = at::tensor(top_k, at::kLong);
  rows.top_p = at::tensor(top_p, at::kDouble);
  rows.seed_state = at::tensor(seeds, at::kLong);
  rows.draw = at::tensor(draws, at::kLong);
  const at::Tensor filtered = sample_rows(logits, rows, SamplingMode::kFiltered, 0);
  for (int64_t i = 0; i < 4; ++i) {
    const at::Tensor step = at::tensor(std::vector<int64_t>{3 + i}, at::kLong);
    const int64_t alone =
        sample_tokens(logits.narrow(0, i, 1), settings[static_cast<std::size_t>(i)], step).item<int64_t>();
    EXPECT_EQ(filtered[i].item<int64_t>(), alone) << "row " << i;
  }
  // The temperature-only row and the greedy row draw the same in a step without the filters.
  const at::Tensor tempered =
      sample_rows(logits.narrow(0, 0, 2),
                  {rows.temperature.narrow(0, 0, 2), rows.top_k.narrow(0, 0, 2), rows.top_p.narrow(0, 0, 2),
                   rows.seed_state.narrow(0, 0, 2), rows.draw.narrow(0, 0, 2)},
                  SamplingMode::kTemperature, 0);
  EXPECT_TRUE(at::equal(tempered, filtered.narrow(0, 0, 2)));
}

}  // namespace
}  // namespace graphed::infer
