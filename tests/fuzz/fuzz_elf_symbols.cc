// libFuzzer target for the plugin symbol reader, read_symbols (core/src/registry/elf_symbols.cc),
// which lists a plugin's classes from its ELF dynamic symbol table without loading it.
//
// The input is an ELF file (kept in memory, the same file for every input). read_symbols must
// return nullopt for a file without the ELF magic, else symbols or a PluginError or DataLoss
// naming the file; exported_names_in_section runs over what it returns.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "fuzz_files.h"
#include "registry/elf_symbols.h"
#include "trainyard/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainyard;
  using namespace trainyard::fuzz;
  static MemFile file("fuzz_elf_symbols");
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  file.assign(input);
  std::optional<elf::SymbolTable> table;
  try {
    table = elf::read_symbols(file.path());
  } catch (const Error& e) {
    const std::string what = e.what();
    FUZZ_CHECK(what.find(file.path()) != std::string::npos,
               "error without the file's name: " + what);
    FUZZ_CHECK(dynamic_cast<const PluginError*>(&e) != nullptr ||
                   dynamic_cast<const DataLoss*>(&e) != nullptr,
               "neither PluginError nor DataLoss: " + what);
    FUZZ_CHECK(input.starts_with("\x7f"
                                 "ELF"),
               "an error for a file that is not ELF: " + what);
    return 0;
  }
  FUZZ_CHECK(table.has_value() == input.starts_with("\x7f"
                                                    "ELF"),
             "nullopt exactly when the ELF magic is missing");
  if (!table) return 0;
  elf::exported_names_in_section(*table, "trainyard_plugin");
  for (const elf::Symbol& s : table->symbols) {
    if (!s.section.empty()) elf::exported_names_in_section(*table, s.section);
    break;
  }
  return 0;
}
