// tests/grammar/matcher_test.cpp — Grammar's builder helpers and validation, and Matcher on small grammars:
// literals, classes, bounded and unbounded repetition, references, recursion, rollback; and the token mask.
#include "graphed/grammar/matcher.h"

#include <gtest/gtest.h>

#include <string>

#include "graphed/grammar/token_mask.h"

namespace graphed::grammar {
namespace {

bool matches(const Grammar& grammar, const std::string& text) {
  Matcher matcher(grammar);
  return matcher.accept_text(text) && matcher.can_finish();
}

// Whether every byte of text is accepted (a prefix of some sentence), finished or not.
bool accepts_prefix(const Grammar& grammar, const std::string& text) {
  Matcher matcher(grammar);
  return matcher.accept_text(text);
}

Grammar grammar_of(const Sequence& sequence) {
  Grammar grammar;
  grammar.set_root(grammar.add_rule("root", {sequence}));
  return grammar;
}

TEST(GrammarTest, LiteralMatchesExactlyItsBytes) {
  const Grammar grammar = grammar_of(literal("null"));
  EXPECT_TRUE(matches(grammar, "null"));
  EXPECT_FALSE(matches(grammar, "nul"));
  EXPECT_TRUE(accepts_prefix(grammar, "nul"));
  EXPECT_FALSE(accepts_prefix(grammar, "nulll"));
  EXPECT_FALSE(accepts_prefix(grammar, "x"));
}

TEST(GrammarTest, ClassesAndComplement) {
  ByteSet identifier = ByteSet::range('a', 'z');
  identifier.add_range('0', '9').add('_');
  EXPECT_EQ(identifier.size(), 37u);
  Grammar grammar;
  const Element word = grammar.one_or_more({Element::of_bytes(identifier)});
  const Element other = Element::of_bytes(ByteSet::of('"').complement());
  grammar.set_root(grammar.add_rule("root", {{word, other}}));
  EXPECT_TRUE(matches(grammar, "ab_9x"));
  EXPECT_TRUE(matches(grammar, "a\xff"));
  EXPECT_FALSE(matches(grammar, "a\""));
  EXPECT_FALSE(matches(grammar, "x"));
}

TEST(GrammarTest, BoundedRepetitionTakesMinimumToMaximum) {
  Grammar grammar;
  const Element digits = grammar.repeat({Element::of_bytes(ByteSet::range('0', '9'))}, 2, 4);
  grammar.set_root(grammar.add_rule("root", {{digits, Element::of_byte(';')}}));
  EXPECT_FALSE(matches(grammar, "1;"));
  EXPECT_TRUE(matches(grammar, "12;"));
  EXPECT_TRUE(matches(grammar, "123;"));
  EXPECT_TRUE(matches(grammar, "1234;"));
  EXPECT_FALSE(accepts_prefix(grammar, "12345"));
}

TEST(GrammarTest, LargeBoundsStayLinearInRules) {
  Grammar grammar;
  const Element many = grammar.repeat(literal("ab"), 100, 1000);
  grammar.set_root(grammar.add_rule("root", {{many}}));
  EXPECT_LT(grammar.rule_count(), 1000 + 10);
  std::string text;
  for (int count = 0; count < 100; ++count) text += "ab";
  EXPECT_TRUE(matches(grammar, text));
  EXPECT_FALSE(matches(grammar, text.substr(2)));
  for (int count = 100; count < 1000; ++count) text += "ab";
  EXPECT_TRUE(matches(grammar, text));
  Matcher matcher(grammar);
  ASSERT_TRUE(matcher.accept_text(text));
  EXPECT_TRUE(matcher.accepts_nothing_more());
}

TEST(GrammarTest, UnboundedRepetitionKeepsStacksShallow) {
  Grammar grammar;
  const Element star = grammar.zero_or_more(literal("xy"));
  grammar.set_root(grammar.add_rule("root", {{star}}));
  Matcher matcher(grammar);
  EXPECT_TRUE(matcher.can_finish());
  for (int count = 0; count < 5000; ++count) ASSERT_TRUE(matcher.accept_text("xy"));
  EXPECT_TRUE(matcher.can_finish());
  for (const Stack& stack : matcher.stacks()) EXPECT_LE(stack.size(), 3u);
}

TEST(GrammarTest, OptionalAndChoice) {
  Grammar grammar;
  const Element sign = grammar.optional(literal("-"));
  const Element word = grammar.choice({literal("one"), literal("two"), literal("three")});
  grammar.set_root(grammar.add_rule("root", {{sign, word}}));
  EXPECT_TRUE(matches(grammar, "one"));
  EXPECT_TRUE(matches(grammar, "-three"));
  EXPECT_FALSE(matches(grammar, "--one"));
  EXPECT_FALSE(matches(grammar, "t"));
  EXPECT_TRUE(accepts_prefix(grammar, "t"));
}

TEST(GrammarTest, RecursiveReferenceNestsBrackets) {
  Grammar grammar;
  const int nested = grammar.declare_rule("nested");
  grammar.add_alternative(nested, {Element::of_byte('['), Element::of_rule(nested), Element::of_byte(']')});
  grammar.add_alternative(nested, literal("x"));
  grammar.set_root(nested);
  EXPECT_TRUE(matches(grammar, "x"));
  EXPECT_TRUE(matches(grammar, "[[[x]]]"));
  EXPECT_FALSE(matches(grammar, "[[x]"));
  EXPECT_FALSE(accepts_prefix(grammar, "[[x]]]"));
}

TEST(GrammarTest, LeftRecursionIsAnInternalError) {
  Grammar grammar;
  const int list = grammar.declare_rule("list");
  const int blank = grammar.add_rule("blank", {{}, literal(" ")});
  grammar.add_alternative(list, {Element::of_rule(blank), Element::of_rule(list), Element::of_byte(',')});
  grammar.add_alternative(list, literal("x"));
  grammar.set_root(list);
  try {
    grammar.validate();
    FAIL() << "left recursion was not refused";
  } catch (const std::logic_error& error) {
    EXPECT_NE(std::string(error.what()).find("grammar rule 'list' is left-recursive"), std::string::npos)
        << error.what();
  }
}

TEST(GrammarTest, MissingRuleIsAnInternalError) {
  Grammar grammar;
  grammar.set_root(grammar.add_rule("root", {{Element::of_rule(7)}}));
  EXPECT_THROW(grammar.validate(), std::logic_error);
}

TEST(MatcherTest, RefusedByteLeavesStateUnchanged) {
  const Grammar grammar = grammar_of(literal("abc"));
  Matcher matcher(grammar);
  ASSERT_TRUE(matcher.accept('a'));
  const std::vector<Stack> before = matcher.stacks();
  EXPECT_FALSE(matcher.accept('x'));
  EXPECT_EQ(matcher.stacks(), before);
  EXPECT_TRUE(matcher.accept_text("bc"));
  EXPECT_TRUE(matcher.accepts_nothing_more());
}

TEST(MatcherTest, RollbackReturnsToCheckpoint) {
  Grammar grammar;
  const Element word = grammar.choice({literal("cat"), literal("car"), literal("dog")});
  grammar.set_root(grammar.add_rule("root", {{word}}));
  Matcher matcher(grammar);
  ASSERT_TRUE(matcher.accept_text("ca"));
  const std::size_t mark = matcher.checkpoint();
  EXPECT_EQ(mark, 2u);
  ASSERT_TRUE(matcher.accept('t'));
  EXPECT_TRUE(matcher.can_finish());
  matcher.rollback(mark);
  EXPECT_FALSE(matcher.can_finish());
  EXPECT_TRUE(matcher.accept('r'));
  EXPECT_TRUE(matcher.can_finish());
  matcher.reset();
  EXPECT_TRUE(matcher.accept_text("dog"));
  EXPECT_FALSE(matcher.accept_text("dogs"));
}

TEST(MatcherTest, AmbiguousReadingsAreDeduplicated) {
  Grammar grammar;
  const Element first = grammar.zero_or_more(literal("a"));
  const Element second = grammar.zero_or_more(literal("a"));
  grammar.set_root(grammar.add_rule("root", {{first, second, Element::of_byte('b')}}));
  Matcher matcher(grammar);
  for (int count = 0; count < 50; ++count) ASSERT_TRUE(matcher.accept('a'));
  EXPECT_LE(matcher.stacks().size(), 4u);
  EXPECT_TRUE(matcher.accept('b'));
  EXPECT_TRUE(matcher.accepts_nothing_more());
}

TEST(MatcherTest, CopyGoesOnIndependently) {
  Grammar grammar;
  const Element word = grammar.choice({literal("cat"), literal("car")});
  grammar.set_root(grammar.add_rule("root", {{word}}));
  Matcher original(grammar);
  ASSERT_TRUE(original.accept_text("ca"));
  Matcher copy = original;
  ASSERT_TRUE(copy.accept('t'));
  EXPECT_TRUE(copy.can_finish());
  EXPECT_EQ(original.checkpoint(), 2u);
  EXPECT_FALSE(original.can_finish());
  ASSERT_TRUE(original.accept('r'));
  copy = original;
  EXPECT_EQ(copy.stacks(), original.stacks());
  EXPECT_TRUE(copy.accepts_nothing_more());
}

TEST(TokenMaskTest, AllowsTokensWhoseWholeBytesAreAccepted) {
  Grammar grammar;
  const Element word = grammar.choice({literal("true"), literal("false")});
  grammar.set_root(grammar.add_rule("root", {{word}}));
  const std::vector<std::string> vocabulary = {"t", "tr", "true", "truex", "f", "fals", "false", "x", "", "ue"};
  const TokenTrie trie(vocabulary);
  Matcher matcher(grammar);
  std::vector<std::uint32_t> bitmask;
  EXPECT_EQ(allowed_tokens(matcher, trie, bitmask), 6);
  ASSERT_EQ(bitmask.size(), 1u);
  EXPECT_EQ(bitmask[0], 0b0001110111u);
  EXPECT_EQ(matcher.checkpoint(), 0u);  // the search leaves the matcher as it was
  ASSERT_TRUE(matcher.accept_text("tr"));
  EXPECT_EQ(allowed_tokens(matcher, trie, bitmask), 1);
  EXPECT_TRUE(is_allowed(bitmask, 9));
  EXPECT_FALSE(is_allowed(bitmask, 8));
}

TEST(TokenMaskTest, BitmaskSpansManyWords) {
  const Grammar grammar = grammar_of(literal("z"));
  std::vector<std::string> vocabulary(100, "y");
  vocabulary[70] = "z";
  const TokenTrie trie(vocabulary);
  Matcher matcher(grammar);
  std::vector<std::uint32_t> bitmask;
  EXPECT_EQ(allowed_tokens(matcher, trie, bitmask), 1);
  ASSERT_EQ(bitmask.size(), 4u);
  EXPECT_EQ(bitmask[2], 1u << 6);
}

}  // namespace
}  // namespace graphed::grammar
