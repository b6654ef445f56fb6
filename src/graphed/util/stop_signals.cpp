// util/stop_signals.cpp — see util/stop_signals.h. The handler does only what a signal handler may:
// it reads the clock, sets a flag, writes to stderr and, on a second signal, calls _exit.
#include "graphed/util/stop_signals.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

#include "graphed/util/error.h"

namespace graphed {
namespace {

volatile std::sig_atomic_t first_signal = 0;
volatile std::sig_atomic_t announce_first = 0;
// When the first signal came, in milliseconds of CLOCK_MONOTONIC.
volatile long long first_signal_ms = 0;
const char* announcement_text = nullptr;
std::size_t announcement_length = 0;
std::atomic<bool> installed{false};
struct sigaction previous_interrupt, previous_terminate;

/// A terminal's Ctrl-C reaches every process of the foreground group, and a launcher such as torchrun
/// passes the signal on to its workers as well: both copies arrive within milliseconds. A signal this
/// soon after the first is the same request, not a second Ctrl-C.
constexpr long long kSameRequestMs = 500;

long long monotonic_ms() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long long>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

void write_stderr(const char* text, std::size_t length) {
  while (length > 0) {
    const ssize_t written = ::write(STDERR_FILENO, text, length);
    if (written <= 0) return;
    text += written;
    length -= static_cast<std::size_t>(written);
  }
}

extern "C" void on_stop_signal(int number) {
  if (first_signal != 0) {
    if (monotonic_ms() - first_signal_ms < kSameRequestMs) return;
    static const char kNow[] = "\nsecond signal: exiting now; nothing more is saved\n";
    write_stderr(kNow, sizeof(kNow) - 1);
    _exit(StopSignals::exit_status_of_second_signal(number));
  }
  first_signal_ms = monotonic_ms();
  first_signal = number;
  if (announce_first != 0 && announcement_text != nullptr) write_stderr(announcement_text, announcement_length);
}

}  // namespace

StopSignals::StopSignals(bool announce, std::string announcement) {
  GRAPHED_INTERNAL_ASSERT(!installed.exchange(true), "only one StopSignals may exist at a time");
  static std::string text;  // outlives every handler call
  text = "\n" + announcement + "\n";
  announcement_text = text.c_str();
  announcement_length = text.size();
  announce_first = announce ? 1 : 0;
  first_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a read or wait that the signal interrupts goes on
  sigaction(SIGINT, &action, &previous_interrupt);
  sigaction(SIGTERM, &action, &previous_terminate);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &previous_interrupt, nullptr);
  sigaction(SIGTERM, &previous_terminate, nullptr);
  installed.store(false);
}

bool StopSignals::requested() const { return first_signal != 0; }

std::string StopSignals::signal_name() const {
  switch (first_signal) {
    case 0: return "";
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "signal " + std::to_string(first_signal);
  }
}

int StopSignals::exit_status_of_second_signal(int signal_number) { return 128 + signal_number; }

}  // namespace graphed
