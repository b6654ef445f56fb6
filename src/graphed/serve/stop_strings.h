// serve/stop_strings.h — OpenAI's `stop` strings over streamed text: the text is handed on as it comes,
// except a tail that may be the start of a stop string, which waits for the next piece; once a stop
// string appears, the text before it is the last handed on, and the stop string itself never is.
#pragma once

#include <string>
#include <vector>

namespace graphed::serve {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  struct Piece {
    std::string text;      ///< what may be shown now
    bool stopped = false;  ///< a stop string was found: nothing comes after `text`
  };
  /// Takes the next piece of decoded text.
  Piece push(const std::string& text);
  /// The text still held back (the request ended without a stop string).
  std::string finish();

 private:
  /// Length of the longest tail of pending_ that begins some stop string.
  std::size_t held_tail() const;

  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace graphed::serve
