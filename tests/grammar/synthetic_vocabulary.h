// tests/grammar/synthetic_vocabulary.h — the small vocabulary the grammar tests walk token masks over: every
// single byte, JSON punctuation runs, literals, numbers, the corpus's words, multi-byte characters and escapes.
#pragma once

#include <string>
#include <vector>

namespace graphed::grammar::testing {

// All 256 single bytes, JSON punctuation runs, literals, digit runs, the corpus's words bare and quoted, a
// few multi-byte characters and escapes, and one empty (special) token that must never be allowed.
inline std::vector<std::string> synthetic_vocabulary() {
  std::vector<std::string> vocabulary;
  for (int byte = 0; byte < 256; ++byte) vocabulary.emplace_back(1, static_cast<char>(byte));
  for (const char* piece : {"{\"",
                            "\":",
                            "\",",
                            "\"}",
                            "\":\"",
                            "\",\"",
                            "[]",
                            "{}",
                            "],",
                            "},",
                            "}]",
                            "[{",
                            "]}",
                            ",\"",
                            "true",
                            "false",
                            "null",
                            "-1",
                            "1.5",
                            "e+",
                            "E-",
                            "0.",
                            "\\n",
                            "\\u00e9",
                            "\\\"",
                            "\\ud83d\\ude00",
                            "\xc3\xa9",
                            "\xe2\x88\x9a",
                            "\xf0\x9f\x98\x80",
                            " the",
                            "tr",
                            "ue"}) {
    vocabulary.push_back(piece);
  }
  for (int number = 0; number < 100; ++number) vocabulary.push_back(std::to_string(number));
  for (const char* word : {"name",   "age",    "email", "point", "tags",  "id",    "ok",    "value", "children", "kind",
                           "circle", "radius", "red",   "green", "blue",  "a",     "b",     "c",     "x",        "y",
                           "cat",    "dog",    "note",  "score", "extra", "hello", "world", "ab"}) {
    vocabulary.push_back(word);
    vocabulary.push_back(std::string("\"") + word);
    vocabulary.push_back(std::string("\"") + word + "\"");
    vocabulary.push_back(std::string("\"") + word + "\":");
  }
  vocabulary.emplace_back();  // a special token: bytes left empty
  return vocabulary;
}

}  // namespace graphed::grammar::testing
