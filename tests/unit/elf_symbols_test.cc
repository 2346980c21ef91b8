// The ELF symbol reader the registry lists plugins with (core/src/registry/elf_symbols.h): the
// dynamic symbol table and its own string table, .symtab as a fallback, 32-bit and 64-bit files,
// the registry's filter, and clean errors naming the file for every truncated or corrupted input.
#include "registry/elf_symbols.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "trainyard/error.h"
#include "trainyard/plugin.h"

namespace trainyard::elf {
namespace {

namespace fs = std::filesystem;

fs::path scratch_file(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("trainyard_elf_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir / name;
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

class ElfSymbolsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(scratch_file("").parent_path(), ec);
  }
};

// --- A minimal ELF file, written field by field -------------------------------------------

void put(std::string* out, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

struct TestSymbol {
  std::string name;
  std::string section;  // "" for undefined
  uint64_t size = 8;
  unsigned char binding = STB_GLOBAL;
  unsigned char visibility = STV_DEFAULT;
};

struct TestSection {
  explicit TestSection(std::string section_name, uint32_t section_type = SHT_PROGBITS,
                       std::string section_contents = "")
      : name(std::move(section_name)), type(section_type), contents(std::move(section_contents)) {}
  std::string name;
  uint32_t type;
  std::string contents;
  uint32_t link = 0;
  uint64_t entsize = 0;
};

struct ElfSpec {
  unsigned char elf_class = ELFCLASS64;
  unsigned char data = ELFDATA2LSB;
  bool dynsym = true;   // a .dynsym/.dynstr pair
  bool symtab = false;  // a .symtab/.strtab pair, naming its symbols with a "static_" prefix
  std::vector<TestSymbol> symbols;
};

// The symbols the registry's filter should keep from kSymbols, and the rest.
const std::vector<TestSymbol> kSymbols = {
    {"trainyard_plugin_entry", "tyard"},
    {"tyc_model__SyntheticModel", "tyard", 8, STB_WEAK},
    {"local_in_section", "tyard", 8, STB_LOCAL},
    {"hidden_in_section", "tyard", 8, STB_GLOBAL, STV_HIDDEN},
    {"sizeless_in_section", "tyard", 0},
    {"exported_function", ".text", 16},
    {"imported_function", "", 0},
};
const std::vector<std::string> kExportedInTyard = {"trainyard_plugin_entry",
                                                   "tyc_model__SyntheticModel"};

std::string symbol_table(const ElfSpec& spec, const std::vector<TestSection>& sections,
                         const std::string& prefix, std::string* names) {
  const bool is64 = spec.elf_class == ELFCLASS64;
  std::string table(is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym), '\0');  // the null symbol
  names->assign(1, '\0');
  for (const TestSymbol& s : spec.symbols) {
    uint64_t name = names->size();
    *names += prefix + s.name + '\0';
    uint64_t shndx = SHN_UNDEF;
    for (std::size_t i = 0; i < sections.size(); ++i) {
      if (!s.section.empty() && sections[i].name == s.section) shndx = i;
    }
    const unsigned char info = static_cast<unsigned char>((s.binding << 4) | STT_OBJECT);
    if (is64) {
      put(&table, name, 4);
      table.push_back(static_cast<char>(info));
      table.push_back(static_cast<char>(s.visibility));
      put(&table, shndx, 2);
      put(&table, 0x1000, 8);  // st_value
      put(&table, s.size, 8);
    } else {
      put(&table, name, 4);
      put(&table, 0x1000, 4);
      put(&table, s.size, 4);
      table.push_back(static_cast<char>(info));
      table.push_back(static_cast<char>(s.visibility));
      put(&table, shndx, 2);
    }
  }
  return table;
}

// Sections in order: null, tyard, .text, [.dynsym, .dynstr], [.symtab, .strtab], .shstrtab
// (last, as ld puts it: the string table Boost 1.74 wrongly took for the symbols' one). The
// section header table ends the file.
std::string make_elf(const ElfSpec& spec) {
  const bool is64 = spec.elf_class == ELFCLASS64;
  std::vector<TestSection> sections = {TestSection("", SHT_NULL),
                                       TestSection("tyard", SHT_PROGBITS, std::string(40, '\x11')),
                                       TestSection(".text")};
  std::size_t dynsym = 0;
  std::size_t symtab = 0;
  if (spec.dynsym) {
    dynsym = sections.size();
    sections.emplace_back(".dynsym", SHT_DYNSYM);
    sections.emplace_back(".dynstr", SHT_STRTAB);
  }
  if (spec.symtab) {
    symtab = sections.size();
    sections.emplace_back(".symtab", SHT_SYMTAB);
    sections.emplace_back(".strtab", SHT_STRTAB);
  }
  for (std::size_t table : {dynsym, symtab}) {
    if (table == 0) continue;
    std::string names;
    sections[table].contents =
        symbol_table(spec, sections, table == symtab ? "static_" : "", &names);
    sections[table].link = static_cast<uint32_t>(table + 1);
    sections[table].entsize = is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
    sections[table + 1].contents = names;
  }
  sections.emplace_back(".shstrtab", SHT_STRTAB);
  std::string shstrtab(1, '\0');
  std::vector<uint64_t> name_offsets;
  for (const TestSection& s : sections) {
    name_offsets.push_back(s.name.empty() ? 0 : shstrtab.size());
    if (!s.name.empty()) shstrtab += s.name + '\0';
  }
  sections.back().contents = shstrtab;

  const std::size_t ehdr_size = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
  const std::size_t shdr_size = is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
  const int word = is64 ? 8 : 4;
  std::string body;
  std::vector<uint64_t> offsets;
  for (const TestSection& s : sections) {
    offsets.push_back(ehdr_size + body.size());
    body += s.contents;
  }
  const uint64_t shoff = ehdr_size + body.size();

  std::string file = ELFMAG;
  file.push_back(static_cast<char>(spec.elf_class));
  file.push_back(static_cast<char>(spec.data));
  file.push_back(EV_CURRENT);
  file.resize(EI_NIDENT, '\0');
  put(&file, ET_DYN, 2);
  put(&file, is64 ? EM_X86_64 : EM_386, 2);
  put(&file, EV_CURRENT, 4);
  put(&file, 0, word);      // e_entry
  put(&file, 0, word);      // e_phoff
  put(&file, shoff, word);  // e_shoff
  put(&file, 0, 4);         // e_flags
  put(&file, ehdr_size, 2);
  put(&file, 0, 2);  // e_phentsize
  put(&file, 0, 2);  // e_phnum
  put(&file, shdr_size, 2);
  put(&file, sections.size(), 2);
  put(&file, sections.size() - 1, 2);  // e_shstrndx
  file += body;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const TestSection& s = sections[i];
    put(&file, name_offsets[i], 4);
    put(&file, s.type, 4);
    put(&file, 0, word);  // sh_flags
    put(&file, 0, word);  // sh_addr
    put(&file, i == 0 ? 0 : offsets[i], word);
    put(&file, s.contents.size(), word);
    put(&file, s.link, 4);
    put(&file, 0, 4);     // sh_info
    put(&file, 1, word);  // sh_addralign
    put(&file, s.entsize, word);
  }
  return file;
}

// --- Reading ------------------------------------------------------------------------------

TEST_F(ElfSymbolsTest, ReadsTheDynamicSymbolTableOfAPlugin) {
  fs::path plugin = fs::path(TRAINYARD_FIXTURE_DIR) / "good" / "libfixture_good.so";
  std::optional<SymbolTable> table = read_symbols(plugin);
  ASSERT_TRUE(table.has_value());
  EXPECT_EQ(table->table, ".dynsym");
  EXPECT_EQ(
      sorted(exported_names_in_section(*table, kPluginSection)),
      sorted({"trainyard_plugin_entry",
              "tyabi_" + std::to_string(kSdkAbiVersion) + "_" +
                  (kThisCompilerFamily == CompilerFamily::kClang ? "clang" : "gcc"),
              "typlugin_fixture_good__1_2_3", "tyc_model__FixtureModel", "tyc_loss__FixtureLoss"}));
  // Imports are in the table too, in no section.
  bool has_import = false;
  for (const Symbol& s : table->symbols) has_import |= s.section.empty() && !s.name.empty();
  EXPECT_TRUE(has_import);
}

TEST_F(ElfSymbolsTest, StrippedPluginKeepsItsDynamicSymbols) {
  const std::string strip = TRAINYARD_STRIP;
  if (strip.empty()) GTEST_SKIP() << "no strip program was found when the build was configured";
  fs::path copy = scratch_file("libfixture_good.so");
  fs::copy_file(fs::path(TRAINYARD_FIXTURE_DIR) / "good" / "libfixture_good.so", copy,
                fs::copy_options::overwrite_existing);
  for (const char* mode : {"--strip-debug", "--strip-unneeded", "--strip-all"}) {
    std::string command = "'" + strip + "' " + mode + " '" + copy.string() + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    std::optional<SymbolTable> table = read_symbols(copy);
    ASSERT_TRUE(table.has_value()) << mode;
    EXPECT_EQ(exported_names_in_section(*table, kPluginSection).size(), 5u) << mode;
  }
}

class SyntheticElfTest : public ElfSymbolsTest,
                         public ::testing::WithParamInterface<unsigned char> {};

TEST_P(SyntheticElfTest, ReadsNamesThroughTheTablesOwnStringTable) {
  ElfSpec spec;
  spec.elf_class = GetParam();
  spec.symbols = kSymbols;
  fs::path path = scratch_file("libsynthetic.so");
  write_file(path, make_elf(spec));
  std::optional<SymbolTable> table = read_symbols(path);
  ASSERT_TRUE(table.has_value());
  EXPECT_EQ(table->table, ".dynsym");
  ASSERT_EQ(table->symbols.size(), kSymbols.size());
  for (std::size_t i = 0; i < kSymbols.size(); ++i) {
    EXPECT_EQ(table->symbols[i].name, kSymbols[i].name);
    EXPECT_EQ(table->symbols[i].section, kSymbols[i].section);
    EXPECT_EQ(table->symbols[i].size, kSymbols[i].size);
    EXPECT_EQ(table->symbols[i].binding, kSymbols[i].binding);
    EXPECT_EQ(table->symbols[i].visibility, kSymbols[i].visibility);
  }
  // Global or weak, default visibility, a size, in the section: what the registry lists.
  EXPECT_EQ(exported_names_in_section(*table, "tyard"), kExportedInTyard);
  EXPECT_EQ(exported_names_in_section(*table, ".text"),
            std::vector<std::string>{"exported_function"});
  EXPECT_TRUE(exported_names_in_section(*table, "nosuch").empty());
}

TEST_P(SyntheticElfTest, PrefersTheDynamicTableAndFallsBackToSymtab) {
  ElfSpec spec;
  spec.elf_class = GetParam();
  spec.symbols = kSymbols;
  spec.symtab = true;
  fs::path path = scratch_file("libboth.so");
  write_file(path, make_elf(spec));
  std::optional<SymbolTable> both = read_symbols(path);
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->table, ".dynsym");
  EXPECT_EQ(exported_names_in_section(*both, "tyard"), kExportedInTyard);

  spec.dynsym = false;
  write_file(path, make_elf(spec));
  std::optional<SymbolTable> only_symtab = read_symbols(path);
  ASSERT_TRUE(only_symtab.has_value());
  EXPECT_EQ(only_symtab->table, ".symtab");
  EXPECT_EQ(exported_names_in_section(*only_symtab, "tyard"),
            (std::vector<std::string>{"static_trainyard_plugin_entry",
                                      "static_tyc_model__SyntheticModel"}));

  spec.symtab = false;
  write_file(path, make_elf(spec));
  std::optional<SymbolTable> none = read_symbols(path);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->table, "");
  EXPECT_TRUE(none->symbols.empty());
}

TEST_P(SyntheticElfTest, EveryTruncationIsAnErrorNamingTheFile) {
  ElfSpec spec;
  spec.elf_class = GetParam();
  spec.symbols = kSymbols;
  const std::string whole = make_elf(spec);
  fs::path path = scratch_file("libtruncated.so");
  for (std::size_t length = 0; length < whole.size(); ++length) {
    write_file(path, whole.substr(0, length));
    if (length < SELFMAG) {
      EXPECT_FALSE(read_symbols(path).has_value()) << length;
      continue;
    }
    try {
      read_symbols(path);
      ADD_FAILURE() << "a copy cut to " << length << " of " << whole.size() << " bytes was read";
    } catch (const DataLoss& e) {
      EXPECT_NE(std::string(e.what()).find(path.string() + " is a truncated or malformed ELF"),
                std::string::npos)
          << e.what();
    }
  }
}

// Random corruption of the headers and tables never crashes the reader or escapes as anything
// but a trainyard::Error naming the file.
TEST_P(SyntheticElfTest, CorruptedFilesGiveErrorsNamingTheFile) {
  ElfSpec spec;
  spec.elf_class = GetParam();
  spec.symbols = kSymbols;
  spec.symtab = true;
  const std::string whole = make_elf(spec);
  fs::path path = scratch_file("libcorrupt.so");
  std::mt19937 rng(1234);
  int errors = 0;
  for (int round = 0; round < 1000; ++round) {
    std::string bytes = whole;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Skip the magic number: a file without it is simply not ELF.
      std::size_t at = SELFMAG + rng() % (bytes.size() - SELFMAG);
      bytes[at] = static_cast<char>(rng() % 3 == 0 ? 0xff : rng());
    }
    write_file(path, bytes);
    try {
      read_symbols(path);
    } catch (const Error& e) {
      ++errors;
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(errors, 0);
}

// A 2 GB sparse file whose string table claims 1 GiB used to be read whole (a command listing
// plugins used 4.5 GB); no part of a plugin larger than 64 MiB is read.
TEST_F(ElfSymbolsTest, SparseFileClaimingAHugeTableIsRefusedBeforeReading) {
  ElfSpec spec;
  spec.symbols = kSymbols;
  std::string bytes = make_elf(spec);
  // Sections: null, tyard, .text, .dynsym, .dynstr (4), .shstrtab; sh_size is at 32 in Elf64_Shdr.
  uint64_t shoff = 0;
  std::memcpy(&shoff, bytes.data() + offsetof(Elf64_Ehdr, e_shoff), 8);
  const uint64_t claimed = uint64_t{1} << 30;
  std::memcpy(bytes.data() + shoff + 4 * sizeof(Elf64_Shdr) + offsetof(Elf64_Shdr, sh_size),
              &claimed, 8);
  fs::path path = scratch_file("libsparse.so");
  write_file(path, bytes);
  fs::resize_file(path, uint64_t{2} << 30);  // sparse: no disk blocks
  try {
    read_symbols(path);
    FAIL() << "a 1 GiB string table was read";
  } catch (const DataLoss& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() +
                                         " is a truncated or malformed ELF file: "
                                         "its symbol name table .dynstr (section 4) (1073741824 "
                                         "bytes at offset "),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("is larger than the 67108864 bytes"), std::string::npos)
        << e.what();
  }
  fs::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Classes, SyntheticElfTest, ::testing::Values(ELFCLASS64, ELFCLASS32),
                         [](const auto& info) {
                           return std::string(info.param == ELFCLASS64 ? "Elf64" : "Elf32");
                         });

TEST_F(ElfSymbolsTest, OtherByteOrdersAndClassesAreRefusedByName) {
  ElfSpec spec;
  spec.symbols = kSymbols;
  spec.data = ELFDATA2MSB;
  fs::path path = scratch_file("libbig.so");
  write_file(path, make_elf(spec));
  try {
    read_symbols(path);
    ADD_FAILURE() << "a big-endian file was read";
  } catch (const PluginError& e) {
    EXPECT_EQ(std::string(e.what()),
              path.string() +
                  " is a big-endian ELF file; Trainyard reads little-endian ELF "
                  "files only");
  }

  std::string bytes = make_elf(ElfSpec{});
  bytes[EI_CLASS] = 7;
  write_file(path, bytes);
  EXPECT_THROW(read_symbols(path), PluginError);
}

TEST_F(ElfSymbolsTest, FileWithoutTheElfMagicIsNotElf) {
  fs::path path = scratch_file("libscript.so");
  write_file(path, "/* GNU ld script */\nINPUT(-lfoo)\n");
  EXPECT_FALSE(read_symbols(path).has_value());
  write_file(path, "");
  EXPECT_FALSE(read_symbols(path).has_value());
}

TEST_F(ElfSymbolsTest, CorruptedPluginGivesAnErrorNamingTheFile) {
  const std::string plugin =
      read_file(fs::path(TRAINYARD_FIXTURE_DIR) / "good" / "libfixture_good.so");
  ASSERT_GT(plugin.size(), sizeof(Elf64_Ehdr));
  uint64_t shoff = 0;
  std::memcpy(&shoff, plugin.data() + offsetof(Elf64_Ehdr, e_shoff), sizeof shoff);
  ASSERT_LT(shoff, plugin.size());
  fs::path path = scratch_file("libfixture_good.so");
  std::mt19937 rng(99);
  for (int round = 0; round < 300; ++round) {
    std::string bytes = plugin;
    // The ELF header and the section header table, where every offset and size lies.
    for (int f = 0; f < 3; ++f) {
      std::size_t at = rng() % 2 == 0 ? SELFMAG + rng() % (sizeof(Elf64_Ehdr) - SELFMAG)
                                      : shoff + rng() % (plugin.size() - shoff);
      bytes[at] = static_cast<char>(rng());
    }
    write_file(path, bytes);
    try {
      read_symbols(path);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace trainyard::elf
