// The symbol table of an ELF file, read from the file without loading it (no code in the file
// runs). The plugin registry lists a plugin's classes from these names.
//
// The reader takes the dynamic symbol table (.dynsym, with the string table its sh_link names):
// the symbols the dynamic loader sees, which every shared library has and no strip removes. A
// file without one (an executable linked statically, an object file) gives its static symbol
// table (.symtab) instead. It reads 32-bit and 64-bit little-endian files; it needs the section
// header table (which strip keeps) to find the tables and to name a symbol's section.
//
// Internal to libtrainyard_core.
#ifndef TRAINYARD_CORE_ELF_SYMBOLS_H_
#define TRAINYARD_CORE_ELF_SYMBOLS_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainyard::elf {

struct Symbol {
  std::string name;
  // The section the symbol is defined in; empty when it is undefined (imported), absolute or
  // common, or its section has no name.
  std::string section;
  uint64_t size = 0;
  unsigned char binding = 0;     // STB_LOCAL, STB_GLOBAL, STB_WEAK, ... (<elf.h>)
  unsigned char visibility = 0;  // STV_DEFAULT, STV_HIDDEN, ...
};

struct SymbolTable {
  std::string table;            // ".dynsym" or ".symtab"; empty when the file has neither
  std::vector<Symbol> symbols;  // in table order, without the null symbol at index 0
};

// Reads the symbols of the ELF file at `path`. Returns std::nullopt when the file does not
// begin with the ELF magic number (it is not an ELF file at all). Throws PluginError naming
// `path` when the file cannot be read or is an ELF file of a kind this reader does not read
// (big-endian, an unknown class), and DataLoss naming `path` and the part at fault when it is
// truncated or malformed: every offset, size and index taken from the file is checked against
// the file's size or the table it indexes before it is used, and no part read is larger than
// 64 MiB (a sparse file of gigabytes is refused, not read). A file that is not a regular file
// (a FIFO, a device) is a PluginError.
std::optional<SymbolTable> read_symbols(const std::filesystem::path& path);

// The names of the symbols that `table` has defined in the section named `section` with global
// or weak binding, default visibility and a nonzero size, in table order: the exported
// variables (such as Boost.DLL's section aliases) the section holds. Nameless symbols are left
// out.
std::vector<std::string> exported_names_in_section(const SymbolTable& table,
                                                   std::string_view section);

}  // namespace trainyard::elf

#endif  // TRAINYARD_CORE_ELF_SYMBOLS_H_
