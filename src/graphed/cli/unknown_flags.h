// cli/unknown_flags.h — what the command line says about a flag it does not know: another project's name
// for one of ours (nanoGPT, llm.c, Hugging Face, vLLM), a flag of another command, one of Megatron-LM's that graphed
// does not take (and what it does instead), or the nearest spelling.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace graphed::cli {

/// The flags a command takes, dash spellings (the migrated legacy ones left out).
std::vector<std::string> flags_of(const CLI::App& command);

/// The message for an argument `command` (empty: before a command is named) does not take, with its fix.
/// subcommands: every command's parser by name; command_runs_a_model: generate or serve, which take the
/// model's settings from --load or --hf.
std::string unknown_argument_message(const std::string& argument, const std::string& command,
                                     const std::map<std::string, CLI::App*>& subcommands, bool command_runs_a_model);

}  // namespace graphed::cli
