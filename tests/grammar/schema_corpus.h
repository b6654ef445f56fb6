// tests/grammar/schema_corpus.h — the schemas the grammar tests compile, each with documents in the
// canonical compact form that it must accept and documents it must refuse.
#pragma once

#include <string>
#include <vector>

namespace graphed::grammar::testing {

struct SchemaCase {
  std::string name;
  std::string schema;  // JSON text; properties come in the order written
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

inline const std::vector<SchemaCase>& schema_corpus() {
  static const std::vector<SchemaCase> corpus = {
      {"person",
       R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer"},
           "email":{"type":"string","maxLength":6}},"required":["name","age"],"additionalProperties":false})",
       {R"({"name":"Al","age":30})", R"({"name":"Al","age":-3,"email":"a@b"})", R"({"name":"","age":0})"},
       {R"({"age":30,"name":"Al"})", R"({"name":"Al"})", R"({"name":"Al","age":01})", R"({ "name":"Al","age":3})",
        R"({"name":"Al","age":3,"x":1})", R"({"name":"Al","age":3,})", R"({"name":"123456789","age":3})"}},
      {"enum", R"({"enum":["red","green",3,null]})", {R"("red")", "3", "null"}, {R"("blue")", R"("re")", "4", "[]"}},
      {"bounded_array",
       R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1,-2,3]", "[0,0]"},
       {"[]", "[1,2,3,4]", "[1.5]", "[1,]", "[ 1]"}},
      {"nested",
       R"({"type":"object","properties":{"point":{"type":"object","properties":{"x":{"type":"number"},
           "y":{"type":"number"}},"required":["x","y"]},"tags":{"type":"array","items":{"enum":["a","b"]},
           "maxItems":2}},"required":["point"]})",
       {R"({"point":{"x":1.5,"y":-2e3}})", R"({"point":{"x":0,"y":1},"tags":["a","b"]})",
        R"({"point":{"x":0,"y":1},"tags":[]})"},
       {R"({"point":{"x":1}})", R"({"point":{"x":1,"y":2},"tags":["c"]})", R"({"tags":[]})",
        R"({"point":{"x":1.,"y":2}})", R"({"point":{"x":1,"y":2},"tags":["a","a","b"]})"}},
      {"any_of",
       R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":3},{"type":"null"}]})",
       {"5", R"("abc")", "null", "-0"},
       {R"("abcd")", "true", "1.5", "00"}},
      {"defs",
       R"({"$defs":{"item":{"type":"object","properties":{"id":{"type":"integer"},"ok":{"type":"boolean"}},
           "required":["id","ok"]}},"type":"array","items":{"$ref":"#/$defs/item"},"maxItems":3})",
       {"[]", R"([{"id":1,"ok":true}])", R"([{"id":1,"ok":true},{"id":2,"ok":false}])"},
       {R"([{"id":1}])", R"([{"ok":true,"id":1}])", R"([{"id":1,"ok":1}])"}},
      {"recursive_tree",
       R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array",
           "items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["value"]}},"$ref":"#/$defs/node"})",
       {R"({"value":1})", R"({"value":1,"children":[{"value":2},{"value":3,"children":[]}]})"},
       {R"({"value":1,"children":[{}]})", R"({"children":[]})",
        R"({"value":1,"children":[{"value":2},{"value":3},{"value":4}]})"}},
      {"const",
       R"({"type":"object","properties":{"kind":{"const":"circle"},"radius":{"type":"number"}},
           "required":["kind","radius"]})",
       {R"({"kind":"circle","radius":2.5})"},
       {R"({"kind":"square","radius":2.5})", R"({"kind":"circle"})"}},
      {"primitives",
       R"({"type":["boolean","null","integer"]})",
       {"true", "false", "null", "-12"},
       {R"("true")", "1e3", "nul", "truefalse"}},
      {"bounded_string",
       R"({"type":"string","minLength":2,"maxLength":4})",
       {R"("ab")", "\"\xc3\xa9\xe2\x88\x9ax\"", R"("\u00e9\n")", R"("\ud83d\ude00!")", "\"\xf0\x9f\x98\x80z\""},
       {R"("a")", R"("abcde")", "\"a\x01\"", "\"\xc3\"", "\"\xc0\xaf\"", R"("\ud83dab")", R"("\x")",
        "\"\xed\xa0\x80\""}},
      {"all_optional",
       R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"},"c":{"type":"null"}}})",
       {"{}", R"({"b":true})", R"({"a":1,"c":null})", R"({"a":1,"b":false,"c":null})"},
       {R"({,"b":true})", R"({"b":true,})", R"({"c":null,"a":1})", R"({"a":1,"a":2})"}},
      {"prefix_items",
       R"({"type":"array","prefixItems":[{"type":"string","maxLength":3},{"type":"number"}],"minItems":1})",
       {R"(["ab"])", R"(["ab",1])"},
       {"[]", R"(["ab",1,2])", "[1]"}},
      {"one_of_objects",
       R"({"oneOf":[{"type":"object","properties":{"cat":{"type":"boolean"}},"required":["cat"]},
           {"type":"object","properties":{"dog":{"type":"integer"}},"required":["dog"]}]})",
       {R"({"cat":true})", R"({"dog":7})"},
       {R"({"cat":1})", "{}", R"({"cat":true,"dog":7})"}},
      {"free_text",
       R"({"type":"object","properties":{"note":{"type":"string"},"score":{"type":"number"},
           "extra":{}},"required":["note","score"]})",
       {R"({"note":"hi there","score":1e-3})", R"({"note":"","score":-0.5,"extra":{"x":[1,"y",null]}})"},
       {R"({"note":"a"b","score":1})", R"({"note":"a","score":.5})", "{\"note\":\"a\nb\",\"score\":1}"}},
      {"items_bounds_tuple",
       R"({"type":"array","prefixItems":[{"type":"boolean"}],"items":{"type":"null"},"minItems":2,"maxItems":3})",
       {"[true,null]", "[false,null,null]"},
       {"[true]", "[true,null,null,null]", "[null,null]"}},
      {"patterns",
       R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{3}$"},
           "tag":{"type":"string","pattern":"x\\d|^y$"},"quote":{"type":"string","pattern":"^\"[a-c]*\"$"}},
           "required":["code","tag"]})",
       {R"({"code":"AB-123","tag":"y"})", R"({"code":"ZZ-000","tag":"ax1b","quote":"\"ab\""})",
        R"({"code":"ZZ-000","tag":"x9"})"},
       {R"({"code":"AB-12","tag":"y"})", R"({"code":"ab-123","tag":"y"})", R"({"code":"AB-123","tag":"yy"})",
        R"({"code":"AB-123","tag":"x"})", R"({"code":"AB-123","tag":"y","quote":"ab"})"}},
      {"formats",
       R"({"type":"object","properties":{"day":{"type":"string","format":"date"},"id":{"format":"uuid"},
           "ip":{"type":"string","format":"ipv4"},"at":{"type":"string","format":"date-time"}},
           "required":["day","id","ip"]})",
       {R"({"day":"2024-02-28","id":"123e4567-e89b-12d3-a456-426614174000","ip":"10.0.255.1"})",
        R"({"day":"1999-12-31","id":"00000000-0000-0000-0000-00000000000A","ip":"0.0.0.0",)"
        R"("at":"2026-11-29T03:04:05.25+01:00"})"},
       {R"({"day":"2024-02-30","id":"123e4567-e89b-12d3-a456-426614174000","ip":"10.0.255.1"})",
        R"({"day":"2024-13-01","id":"123e4567-e89b-12d3-a456-426614174000","ip":"10.0.255.1"})",
        R"({"day":"2024-02-28","id":"123e4567e89b12d3a456426614174000","ip":"10.0.255.1"})",
        R"({"day":"2024-02-28","id":"123e4567-e89b-12d3-a456-426614174000","ip":"256.0.0.1"})",
        R"({"day":"2024-02-28","id":"123e4567-e89b-12d3-a456-426614174000","ip":"01.0.0.1"})",
        R"({"day":"2024-02-28","id":"123e4567-e89b-12d3-a456-426614174000","ip":"1.0.0.1","at":"2026-11-29"})"}},
  };
  return corpus;
}

}  // namespace graphed::grammar::testing
