// tests/jinja/jinja_render_main.cpp — jinja_render TEMPLATE_FILE CONTEXT_JSON_FILE: renders a template
// with graphed::jinja and writes the text to stdout byte for byte, for jinja_reference.py to compare
// with jinja2/transformers. A TemplateError goes to stderr with exit code 1; a bad file or JSON, 2.
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "graphed/jinja/template.h"

namespace {

bool read_file(const char* path, std::string& text) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  std::ostringstream buffer;
  buffer << file.rdbuf();
  text = buffer.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: jinja_render TEMPLATE_FILE CONTEXT_JSON_FILE\n";
    return 2;
  }
  std::string source;
  std::string context_text;
  if (!read_file(argv[1], source) || !read_file(argv[2], context_text)) {
    std::cerr << "jinja_render: cannot read " << argv[1] << " or " << argv[2] << "\n";
    return 2;
  }
  nlohmann::ordered_json context;
  try {
    context = nlohmann::ordered_json::parse(context_text);
  } catch (const nlohmann::json::exception& error) {
    std::cerr << "jinja_render: " << argv[2] << " is not valid JSON: " << error.what() << "\n";
    return 2;
  }
  try {
    const graphed::jinja::Template chat_template(source);
    const std::string text = chat_template.render(context);
    std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::cout.flush();
  } catch (const graphed::jinja::TemplateError& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  return 0;
}
