// grammar/json_schema.cpp — the schema compiler: each (sub)schema becomes a rule over the JSON rules of
// detail/json_rules.h, in the canonical compact form. check_schema() has refused anything outside the subset.
#include "graphed/grammar/json_schema.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "graphed/grammar/detail/json_rules.h"
#include "graphed/grammar/detail/schema_check.h"
#include "graphed/grammar/detail/string_formats.h"
#include "graphed/grammar/regex.h"

namespace graphed::grammar {

namespace {

using Json = nlohmann::ordered_json;

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const Json& root) : root_(root), json_(detail::add_json_rules(grammar_)) {}

  /// The root's documents framed as `framing` says (compile_json_schema: one, bare).
  Grammar compile(const Framing& framing) {
    detail::check_schema(root_);
    const Sequence document =
        concat({literal(framing.before), {compile_schema(root_, "", {})}, literal(framing.after)});
    Sequence root = document;
    if (framing.maximum != 1) {  // the documents after the first, each after a separator
      root.push_back(grammar_.repeat(concat({literal(framing.separator), document}), framing.minimum - 1,
                                     framing.maximum < 0 ? -1 : framing.maximum - 1, "documents"));
    }
    grammar_.set_root(grammar_.add_rule("root", {root}));
    grammar_.validate();
    return std::move(grammar_);
  }

 private:
  // `leading`: the $refs entered since the last byte this schema's value must start with; one seen again
  // would make the grammar left-recursive (a schema that is itself and nothing else).
  Element compile_schema(const Json& schema, const std::string& path, const std::set<std::string>& leading);
  Element compile_reference(const std::string& reference, const std::string& path, std::set<std::string> leading);
  Element compile_type(const Json& schema, const std::string& type, const std::string& path);
  Element compile_constants(const Json& schema, const std::string& path);
  Element compile_object(const Json& schema, const std::string& path);
  Element compile_array(const Json& schema, const std::string& path);
  Element compile_string(const Json& schema);

  const Json& root_;
  Grammar grammar_;
  detail::JsonRules json_;
  std::map<std::string, int> references_;  // $ref -> its rule, declared before its schema compiles
};

std::vector<std::string> types_of(const Json& schema) {
  std::vector<std::string> types;
  if (!schema.contains("type")) return types;
  const Json& type = schema["type"];
  if (type.is_string()) return {type.get<std::string>()};
  for (const Json& name : type) types.push_back(name.get<std::string>());
  return types;
}

bool has_any(const Json& schema, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (schema.contains(key)) return true;
  }
  return false;
}

Element SchemaCompiler::compile_schema(const Json& schema, const std::string& path,
                                       const std::set<std::string>& leading) {
  if (schema.is_boolean()) return Element::of_rule(json_.value);  // true; check_schema refused false
  if (schema.contains("$ref")) return compile_reference(schema["$ref"].get<std::string>(), path, leading);
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    std::vector<Sequence> alternatives;
    const std::string inside = detail::child_path(path, key);
    for (std::size_t index = 0; index < schema[key].size(); ++index) {
      alternatives.push_back(
          {compile_schema(schema[key][index], detail::child_path(inside, std::to_string(index)), leading)});
    }
    return grammar_.choice(std::move(alternatives), key);
  }
  if (has_any(schema, {"const", "enum"})) return compile_constants(schema, path);
  std::vector<std::string> types = types_of(schema);
  if (types.empty()) {  // no type: inferred from the keywords that constrain one, else any value
    if (has_any(schema, {"properties", "required", "additionalProperties"})) types.push_back("object");
    if (has_any(schema, {"items", "prefixItems", "minItems", "maxItems"})) types.push_back("array");
    if (has_any(schema, {"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
    if (types.empty()) return Element::of_rule(json_.value);
  }
  std::vector<Sequence> alternatives;
  for (const std::string& type : types) alternatives.push_back({compile_type(schema, type, path)});
  return alternatives.size() == 1 ? alternatives.front().front() : grammar_.choice(std::move(alternatives), "types");
}

Element SchemaCompiler::compile_reference(const std::string& reference, const std::string& path,
                                          std::set<std::string> leading) {
  if (leading.count(reference) > 0) {
    throw SchemaError("the JSON schema is not valid: '$ref' at " + detail::display_path(path) + " to '" + reference +
                      "' refers back to itself before any object or array; fix: correct the schema");
  }
  const auto found = references_.find(reference);
  if (found != references_.end()) return Element::of_rule(found->second);
  const int rule = grammar_.declare_rule("ref:" + reference);
  references_[reference] = rule;
  leading.insert(reference);
  const std::string target = reference.substr(1);
  grammar_.add_alternative(rule, {compile_schema(root_.at(Json::json_pointer(target)), target, leading)});
  return Element::of_rule(rule);
}

Element SchemaCompiler::compile_type(const Json& schema, const std::string& type, const std::string& path) {
  if (type == "object") return compile_object(schema, path);
  if (type == "array") return compile_array(schema, path);
  if (type == "string") return compile_string(schema);
  if (type == "number") return Element::of_rule(json_.number);
  if (type == "integer") return Element::of_rule(json_.integer);
  if (type == "boolean") return Element::of_rule(json_.boolean);
  return Element::of_rule(json_.null);
}

bool has_type(const Json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") return value.is_number_integer();
  if (type == "boolean") return value.is_boolean();
  return value.is_null();
}

// const and enum: the values as nlohmann-json writes them compactly, keeping those of the schema's types.
Element SchemaCompiler::compile_constants(const Json& schema, const std::string& path) {
  const Json values = schema.contains("const") ? Json::array({schema["const"]}) : schema["enum"];
  const std::vector<std::string> types = types_of(schema);
  std::vector<Sequence> alternatives;
  std::set<std::string> seen;
  for (const Json& value : values) {
    bool typed = types.empty();
    for (const std::string& type : types) typed = typed || has_type(value, type);
    const std::string text = value.dump();
    if (typed && seen.insert(text).second) alternatives.push_back(literal(text));
  }
  if (alternatives.empty()) {
    throw SchemaError("the JSON schema is not valid: no value of 'enum' or 'const' at " + detail::display_path(path) +
                      " has a type 'type' allows; fix: correct the schema");
  }
  return grammar_.choice(std::move(alternatives), "constants");
}

// Members in declared order, each optional one skippable, with a linear count of rules: first[i] reads the
// members from i on when none came before (no comma first), rest[i] when some did.
Element SchemaCompiler::compile_object(const Json& schema, const std::string& path) {
  const bool closed = has_any(schema, {"properties", "additionalProperties", "required"});
  if (!closed) return Element::of_rule(json_.object);
  const Json properties = schema.value("properties", Json::object());
  std::set<std::string> required;
  for (const Json& name : schema.value("required", Json::array())) {
    required.insert(name.get<std::string>());
    if (!properties.contains(name.get<std::string>())) {
      throw SchemaError("the JSON schema is not valid: 'required' at " + detail::display_path(path) + " names '" +
                        name.get<std::string>() +
                        "', which 'properties' does not define (and additional "
                        "properties are not allowed); fix: add it to 'properties' or drop it from 'required'");
    }
  }
  std::vector<Element> members;
  std::vector<bool> optional;
  const std::string inside = detail::child_path(path, "properties");
  for (const auto& [name, property] : properties.items()) {
    const Sequence key = concat({literal(Json(name).dump()), literal(":")});
    const Element value = compile_schema(property, detail::child_path(inside, name), {});
    members.push_back(Element::of_rule(grammar_.add_rule("member:" + name, {concat({key, {value}})})));
    optional.push_back(required.count(name) == 0);
  }
  const std::size_t count = members.size();
  std::vector<int> first(count + 1), rest(count + 1);
  first[count] = grammar_.add_rule("members.end", {{}});
  rest[count] = first[count];
  for (std::size_t index = count; index-- > 0;) {
    const Element after = Element::of_rule(rest[index + 1]);
    std::vector<Sequence> first_alternatives = {{members[index], after}};
    std::vector<Sequence> rest_alternatives = {{Element::of_byte(','), members[index], after}};
    if (optional[index]) {
      first_alternatives.push_back({Element::of_rule(first[index + 1])});
      rest_alternatives.push_back({after});
    }
    first[index] = grammar_.add_rule("members.first", std::move(first_alternatives));
    rest[index] = grammar_.add_rule("members.rest", std::move(rest_alternatives));
  }
  return Element::of_rule(
      grammar_.add_rule("object", {{Element::of_byte('{'), Element::of_rule(first[0]), Element::of_byte('}')}}));
}

// Items 1..k from prefixItems, the rest from items; a length between minItems and maxItems. after[i] reads
// what may follow the i-th item (a comma and the next item, or nothing once the minimum is met).
Element SchemaCompiler::compile_array(const Json& schema, const std::string& path) {
  std::vector<Element> prefix;
  if (schema.contains("prefixItems")) {
    const std::string inside = detail::child_path(path, "prefixItems");
    for (std::size_t index = 0; index < schema["prefixItems"].size(); ++index) {
      prefix.push_back(
          compile_schema(schema["prefixItems"][index], detail::child_path(inside, std::to_string(index)), {}));
    }
  }
  const Json items = schema.value("items", Json(prefix.empty()));  // absent: any items, or none past a prefix
  const bool more_items = !(items.is_boolean() && !items.get<bool>());
  const long minimum = schema.value("minItems", 0L);
  long maximum = schema.contains("maxItems") ? schema["maxItems"].get<long>() : -1;
  if (!more_items)
    maximum = maximum < 0 ? static_cast<long>(prefix.size()) : std::min(maximum, static_cast<long>(prefix.size()));
  if (maximum >= 0 && static_cast<long>(prefix.size()) > maximum) prefix.resize(static_cast<std::size_t>(maximum));
  const long count = static_cast<long>(prefix.size());
  if (minimum > maximum && maximum >= 0) {
    throw SchemaError("the JSON schema is not valid: 'minItems' at " + detail::display_path(path) + " is " +
                      std::to_string(minimum) + " but the array can hold at most " + std::to_string(maximum) +
                      " items; fix: correct the schema");
  }
  // The tail past the prefix: (',' item) repeated, within the bounds that remain.
  Element tail = Element::of_rule(grammar_.add_rule("items.none", {{}}));
  if (more_items && (maximum < 0 || maximum > count)) {
    const Element item = compile_schema(items, detail::child_path(path, "items"), {});
    const long tail_minimum = std::max(0L, minimum - std::max(count, 1L));
    const long tail_maximum = maximum < 0 ? -1 : maximum - std::max(count, 1L);
    const Element repeated = grammar_.repeat({Element::of_byte(','), item}, static_cast<int>(tail_minimum),
                                             static_cast<int>(tail_maximum), "items");
    if (count == 0) prefix.push_back(item);  // the first item has no comma before it
    tail = repeated;
  }
  // after[i]: what follows item i (1-based) of the prefix; the last one is followed by the tail.
  const long listed = static_cast<long>(prefix.size());
  Element after = tail;
  for (long index = listed - 1; index >= 1; --index) {
    std::vector<Sequence> alternatives = {{Element::of_byte(','), prefix[static_cast<std::size_t>(index)], after}};
    if (index >= minimum) alternatives.push_back({});
    after = grammar_.choice(std::move(alternatives), "items.after");
  }
  std::vector<Sequence> bodies;
  if (listed > 0) bodies.push_back(concat({literal("["), {prefix[0], after}, literal("]")}));
  if (minimum == 0) bodies.push_back(literal("[]"));
  return grammar_.choice(std::move(bodies), "array");
}

Element SchemaCompiler::compile_string(const Json& schema) {
  if (schema.contains("pattern")) {
    return add_pattern_string(grammar_, schema["pattern"].get<std::string>(), json_.string_character);
  }
  if (schema.contains("format")) {
    return add_pattern_string(grammar_, detail::format_pattern(schema["format"].get<std::string>()),
                              json_.string_character);
  }
  if (!schema.contains("minLength") && !schema.contains("maxLength")) return Element::of_rule(json_.string);
  const long minimum = schema.value("minLength", 0L);
  const long maximum = schema.contains("maxLength") ? schema["maxLength"].get<long>() : -1;
  const Element characters = grammar_.repeat({Element::of_rule(json_.string_character)}, static_cast<int>(minimum),
                                             static_cast<int>(maximum), "characters");
  return Element::of_rule(grammar_.add_rule("string", {{Element::of_byte('"'), characters, Element::of_byte('"')}}));
}

}  // namespace

Grammar compile_json_schema(const nlohmann::ordered_json& schema) { return SchemaCompiler(schema).compile(Framing{}); }

Grammar compile_framed_json_schema(const nlohmann::ordered_json& schema, const Framing& framing) {
  GRAPHED_INTERNAL_ASSERT(framing.minimum >= 1 && (framing.maximum < 0 || framing.maximum >= framing.minimum),
                          "bad framing counts {", framing.minimum, ",", framing.maximum, "}");
  return SchemaCompiler(schema).compile(framing);
}

Grammar compile_json_schema(const nlohmann::json& schema) {
  return compile_json_schema(nlohmann::ordered_json::parse(schema.dump()));
}

Grammar compile_json_schema_text(std::string_view text) {
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    throw SchemaError(std::string("the JSON schema is not JSON: ") + error.what() + "; fix: send valid JSON");
  }
  return compile_json_schema(schema);
}

Grammar any_json_object() {
  Grammar grammar;
  const detail::JsonRules json = detail::add_json_rules(grammar);
  grammar.set_root(json.object);
  grammar.validate();
  return grammar;
}

}  // namespace graphed::grammar
