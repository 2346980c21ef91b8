#include "registry/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <stdexcept>

#include "trainyard/error.h"

namespace trainyard::elf {
namespace {

namespace fs = std::filesystem;

// Where a field of an ELF structure lies in the file's bytes.
struct Field {
  std::size_t offset;
  std::size_t width;
};

// The fields this reader uses, for one ELF class. Offsets and widths come from <elf.h>; the
// values are decoded from little-endian bytes, whatever the host's byte order.
struct Layout {
  const char* name;
  std::size_t ehdr_size;
  Field e_shoff, e_shentsize, e_shnum, e_shstrndx;
  std::size_t shdr_size;
  Field sh_name, sh_type, sh_offset, sh_size, sh_link, sh_entsize;
  std::size_t sym_size;
  Field st_name, st_info, st_other, st_shndx, st_size;
};

constexpr Layout kElf32 = {
    "ELFCLASS32",
    sizeof(Elf32_Ehdr),
    {offsetof(Elf32_Ehdr, e_shoff), sizeof(Elf32_Ehdr::e_shoff)},
    {offsetof(Elf32_Ehdr, e_shentsize), sizeof(Elf32_Ehdr::e_shentsize)},
    {offsetof(Elf32_Ehdr, e_shnum), sizeof(Elf32_Ehdr::e_shnum)},
    {offsetof(Elf32_Ehdr, e_shstrndx), sizeof(Elf32_Ehdr::e_shstrndx)},
    sizeof(Elf32_Shdr),
    {offsetof(Elf32_Shdr, sh_name), sizeof(Elf32_Shdr::sh_name)},
    {offsetof(Elf32_Shdr, sh_type), sizeof(Elf32_Shdr::sh_type)},
    {offsetof(Elf32_Shdr, sh_offset), sizeof(Elf32_Shdr::sh_offset)},
    {offsetof(Elf32_Shdr, sh_size), sizeof(Elf32_Shdr::sh_size)},
    {offsetof(Elf32_Shdr, sh_link), sizeof(Elf32_Shdr::sh_link)},
    {offsetof(Elf32_Shdr, sh_entsize), sizeof(Elf32_Shdr::sh_entsize)},
    sizeof(Elf32_Sym),
    {offsetof(Elf32_Sym, st_name), sizeof(Elf32_Sym::st_name)},
    {offsetof(Elf32_Sym, st_info), sizeof(Elf32_Sym::st_info)},
    {offsetof(Elf32_Sym, st_other), sizeof(Elf32_Sym::st_other)},
    {offsetof(Elf32_Sym, st_shndx), sizeof(Elf32_Sym::st_shndx)},
    {offsetof(Elf32_Sym, st_size), sizeof(Elf32_Sym::st_size)},
};

constexpr Layout kElf64 = {
    "ELFCLASS64",
    sizeof(Elf64_Ehdr),
    {offsetof(Elf64_Ehdr, e_shoff), sizeof(Elf64_Ehdr::e_shoff)},
    {offsetof(Elf64_Ehdr, e_shentsize), sizeof(Elf64_Ehdr::e_shentsize)},
    {offsetof(Elf64_Ehdr, e_shnum), sizeof(Elf64_Ehdr::e_shnum)},
    {offsetof(Elf64_Ehdr, e_shstrndx), sizeof(Elf64_Ehdr::e_shstrndx)},
    sizeof(Elf64_Shdr),
    {offsetof(Elf64_Shdr, sh_name), sizeof(Elf64_Shdr::sh_name)},
    {offsetof(Elf64_Shdr, sh_type), sizeof(Elf64_Shdr::sh_type)},
    {offsetof(Elf64_Shdr, sh_offset), sizeof(Elf64_Shdr::sh_offset)},
    {offsetof(Elf64_Shdr, sh_size), sizeof(Elf64_Shdr::sh_size)},
    {offsetof(Elf64_Shdr, sh_link), sizeof(Elf64_Shdr::sh_link)},
    {offsetof(Elf64_Shdr, sh_entsize), sizeof(Elf64_Shdr::sh_entsize)},
    sizeof(Elf64_Sym),
    {offsetof(Elf64_Sym, st_name), sizeof(Elf64_Sym::st_name)},
    {offsetof(Elf64_Sym, st_info), sizeof(Elf64_Sym::st_info)},
    {offsetof(Elf64_Sym, st_other), sizeof(Elf64_Sym::st_other)},
    {offsetof(Elf64_Sym, st_shndx), sizeof(Elf64_Sym::st_shndx)},
    {offsetof(Elf64_Sym, st_size), sizeof(Elf64_Sym::st_size)},
};

// The little-endian unsigned integer `field` of the structure that starts at `base`.
uint64_t get(std::string_view bytes, uint64_t base, Field field) {
  if (base > bytes.size() || field.offset + field.width > bytes.size() - base) {
    throw std::logic_error("elf_symbols: a field read past the bytes its bounds check allowed");
  }
  uint64_t value = 0;
  for (std::size_t i = field.width; i-- > 0;) {
    value = (value << 8) | static_cast<unsigned char>(bytes[base + field.offset + i]);
  }
  return value;
}

// The NUL-terminated string at `offset` in string table `table`, or nullopt when it starts or
// runs past the table's end.
std::optional<std::string_view> string_at(std::string_view table, uint64_t offset) {
  if (offset >= table.size()) return std::nullopt;
  std::size_t end = table.find('\0', offset);
  if (end == std::string_view::npos) return std::nullopt;
  return table.substr(offset, end - offset);
}

std::string str(uint64_t n) { return std::to_string(n); }

// The most bytes read for one part of the file (a section header table, a symbol or string
// table). Real plugins' tables are far smaller; a file claiming more (a sparse file of
// gigabytes, a forged size) is refused before anything is allocated for it.
constexpr uint64_t kMaxReadBytes = uint64_t{64} << 20;

// An open ELF file and its size, read piecewise with pread: only the headers and the tables
// used, each bounded by kMaxReadBytes.
class File {
 public:
  explicit File(const fs::path& path) : name_(path.string()) {
    // O_NONBLOCK: a FIFO must not wait for a writer before it is refused below.
    fd_ = ::open(name_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) throw PluginError("cannot read " + name_ + ": " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      ::close(fd_);
      throw PluginError("cannot read " + name_ + ": " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw PluginError("cannot read " + name_ + ": it is not a regular file");
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~File() { ::close(fd_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }

  // The `length` bytes at `offset`, which hold the file's `what`. Throws DataLoss unless they lie
  // inside the file and are at most kMaxReadBytes.
  std::string read(uint64_t offset, uint64_t length, const std::string& what) {
    if (offset > size_ || length > size_ - offset) {
      throw malformed("its " + what + " (" + str(length) + " bytes at offset " + str(offset) +
                      ") runs past the end of the file (" + str(size_) + " bytes)");
    }
    if (length > kMaxReadBytes) {
      throw malformed("its " + what + " (" + str(length) + " bytes at offset " + str(offset) +
                      ") is larger than the " + str(kMaxReadBytes) +
                      " bytes Trainyard reads for one part of a plugin");
    }
    std::string bytes(static_cast<std::size_t>(length), '\0');
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t got =
          ::pread(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        throw PluginError("cannot read " + name_ + ": reading its " + what + " at offset " +
                          str(offset) + " failed" +
                          (got < 0 ? std::string(": ") + std::strerror(errno)
                                   : std::string(": the file ended early")));
      }
      done += static_cast<std::size_t>(got);
    }
    return bytes;
  }

  DataLoss malformed(const std::string& detail) const {
    return DataLoss(name_ + " is a truncated or malformed ELF file: " + detail);
  }

 private:
  std::string name_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

struct Section {
  uint64_t name = 0;  // offset in the section name table
  uint64_t type = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t link = 0;
  uint64_t entsize = 0;
};

class Reader {
 public:
  Reader(File* file, const Layout& layout) : file_(*file), layout_(layout) {}

  SymbolTable read() {
    read_section_headers();
    // The loader's table first: it survives every strip.
    std::optional<std::size_t> table;
    for (std::uint32_t wanted : {SHT_DYNSYM, SHT_SYMTAB}) {
      for (std::size_t i = 1; i < sections_.size() && !table; ++i) {
        if (sections_[i].type == wanted) table = i;
      }
    }
    SymbolTable out;
    if (!table) return out;
    out.table = section_name(*table);
    read_entries(*table, &out.symbols);
    return out;
  }

 private:
  void read_section_headers() {
    const Layout& l = layout_;
    std::string ehdr = file_.read(0, l.ehdr_size, std::string(l.name) + " header");
    uint64_t shoff = get(ehdr, 0, l.e_shoff);
    uint64_t shentsize = get(ehdr, 0, l.e_shentsize);
    uint64_t shnum = get(ehdr, 0, l.e_shnum);
    uint64_t shstrndx = get(ehdr, 0, l.e_shstrndx);
    if (shoff == 0) {
      throw PluginError(file_.name() +
                        " has no ELF section header table (e_shoff is 0), which listing its "
                        "symbols needs; was it stripped with sstrip or a similar tool?");
    }
    if (shentsize < l.shdr_size) {
      throw file_.malformed("its section headers are " + str(shentsize) +
                            " bytes each (e_shentsize)" + ", less than the " + str(l.shdr_size) +
                            " of an " + l.name + " section header");
    }
    // Section 0 holds the section count and the name table's index when they do not fit in
    // the ELF header.
    std::string first = file_.read(shoff, l.shdr_size, "section header 0");
    if (shnum == 0) shnum = get(first, 0, l.sh_size);
    if (shstrndx == SHN_XINDEX) shstrndx = get(first, 0, l.sh_link);
    if (shnum > file_.size() / shentsize) {
      throw file_.malformed("it claims " + str(shnum) + " section headers of " + str(shentsize) +
                            " bytes, more than its " + str(file_.size()) + " bytes can hold");
    }
    std::string headers = file_.read(shoff, shnum * shentsize, "section header table");
    sections_.resize(static_cast<std::size_t>(shnum));
    for (std::size_t i = 0; i < sections_.size(); ++i) {
      uint64_t base = i * shentsize;
      Section& s = sections_[i];
      s.name = get(headers, base, l.sh_name);
      s.type = get(headers, base, l.sh_type);
      s.offset = get(headers, base, l.sh_offset);
      s.size = get(headers, base, l.sh_size);
      s.link = get(headers, base, l.sh_link);
      s.entsize = get(headers, base, l.sh_entsize);
    }
    if (shstrndx != SHN_UNDEF) {
      if (shstrndx >= shnum) {
        throw file_.malformed("its section name table is section " + str(shstrndx) +
                              " (e_shstrndx), but it has " + str(shnum) + " sections");
      }
      section_names_ = section_data(static_cast<std::size_t>(shstrndx), "section name table");
    }
  }

  // The name of section `index` (< sections_.size()), empty when the file has no name table.
  std::string section_name(std::size_t index) const {
    if (section_names_.empty()) return "";
    std::optional<std::string_view> name = string_at(section_names_, sections_[index].name);
    if (!name) {
      throw file_.malformed("the name of section " + str(index) + " (offset " +
                            str(sections_[index].name) +
                            ") lies outside its section name table or is not terminated");
    }
    return std::string(*name);
  }

  // The contents of section `index` (< sections_.size()); a section without file contents
  // (SHT_NOBITS) is empty.
  std::string section_data(std::size_t index, const std::string& what) {
    const Section& s = sections_[index];
    if (s.type == SHT_NOBITS) return "";
    return file_.read(s.offset, s.size, what + " (section " + str(index) + ")");
  }

  // The index of the section that `link` (a table's sh_link) names, which must be of `type`.
  std::size_t linked_section(std::size_t from, uint64_t link, uint32_t type,
                             const char* what) const {
    if (link == SHN_UNDEF || link >= sections_.size() || sections_[link].type != type) {
      throw file_.malformed("section " + str(from) + " (" + section_name(from) + ") links to " +
                            "section " + str(link) + " as its " + what + ", which " +
                            (link == SHN_UNDEF || link >= sections_.size()
                                 ? std::string("does not exist")
                                 : "is of another type (" + str(sections_[link].type) + ")"));
    }
    return static_cast<std::size_t>(link);
  }

  void read_entries(std::size_t index, std::vector<Symbol>* symbols) {
    const Layout& l = layout_;
    const Section& table = sections_[index];
    const std::string table_name = section_name(index);
    uint64_t entsize = table.entsize == 0 ? l.sym_size : table.entsize;
    if (entsize < l.sym_size) {
      throw file_.malformed("its symbol table " + table_name + " has entries of " + str(entsize) +
                            " bytes (sh_entsize), less than the " + str(l.sym_size) + " of an " +
                            l.name + " symbol");
    }
    std::string entries = section_data(index, "symbol table " + table_name);
    std::size_t strtab = linked_section(index, table.link, SHT_STRTAB, "string table");
    std::string names = section_data(strtab, "symbol name table " + section_name(strtab));

    // Symbols in sections numbered from SHN_LORESERVE up keep their real index in an
    // SHT_SYMTAB_SHNDX section linked to the table.
    std::string extended_indices;
    for (std::size_t i = 1; i < sections_.size(); ++i) {
      if (sections_[i].type == SHT_SYMTAB_SHNDX && sections_[i].link == index) {
        extended_indices = section_data(i, "extended section index table");
      }
    }

    const uint64_t count = entries.size() / entsize;
    symbols->reserve(static_cast<std::size_t>(count));
    for (uint64_t i = 1; i < count; ++i) {  // symbol 0 is the null symbol
      const uint64_t base = i * entsize;
      Symbol symbol;
      uint64_t name_offset = get(entries, base, l.st_name);
      std::optional<std::string_view> name = string_at(names, name_offset);
      if (!name) {
        throw file_.malformed("the name of symbol " + str(i) + " in " + table_name + " (offset " +
                              str(name_offset) + ") lies outside its string table or is not " +
                              "terminated");
      }
      symbol.name = std::string(*name);
      uint64_t info = get(entries, base, l.st_info);
      symbol.binding = static_cast<unsigned char>(info >> 4);
      symbol.visibility = static_cast<unsigned char>(get(entries, base, l.st_other) & 0x3);
      symbol.size = get(entries, base, l.st_size);
      uint64_t shndx = get(entries, base, l.st_shndx);
      if (shndx == SHN_XINDEX) {
        Field word = {static_cast<std::size_t>(i * 4), 4};
        if (extended_indices.size() < word.offset + word.width) {
          throw file_.malformed("symbol " + str(i) + " in " + table_name + " (" + symbol.name +
                                ") has an extended section index, but no extended section index "
                                "table holds it");
        }
        shndx = get(extended_indices, 0, word);
      } else if (shndx >= SHN_LORESERVE) {
        shndx = SHN_UNDEF;  // absolute, common or processor-specific: no section
      }
      if (shndx != SHN_UNDEF) {
        if (shndx >= sections_.size()) {
          throw file_.malformed("symbol " + str(i) + " in " + table_name + " (" + symbol.name +
                                ") is defined in section " + str(shndx) + ", but the file has " +
                                str(sections_.size()) + " sections");
        }
        symbol.section = section_name(static_cast<std::size_t>(shndx));
      }
      symbols->push_back(std::move(symbol));
    }
  }

  File& file_;
  const Layout& layout_;
  std::vector<Section> sections_;
  std::string section_names_;
};

}  // namespace

std::optional<SymbolTable> read_symbols(const fs::path& path) {
  File file(path);
  if (file.size() < SELFMAG) return std::nullopt;
  if (file.read(0, SELFMAG, "ELF magic number") != std::string_view(ELFMAG, SELFMAG)) {
    return std::nullopt;
  }
  std::string ident = file.read(0, EI_NIDENT, "ELF identification bytes");
  const unsigned char elf_class = static_cast<unsigned char>(ident[EI_CLASS]);
  const unsigned char data = static_cast<unsigned char>(ident[EI_DATA]);
  if (data == ELFDATA2MSB) {
    throw PluginError(file.name() +
                      " is a big-endian ELF file; Trainyard reads little-endian ELF files only");
  }
  if (data != ELFDATA2LSB) {
    throw file.malformed("its data encoding (EI_DATA) is " + str(data) + ", neither " +
                         "little-endian (1) nor big-endian (2)");
  }
  if (elf_class != ELFCLASS32 && elf_class != ELFCLASS64) {
    throw PluginError(file.name() + " is of ELF class " + str(elf_class) +
                      " (EI_CLASS); Trainyard reads ELFCLASS32 (1) and ELFCLASS64 (2) files only");
  }
  Reader reader(&file, elf_class == ELFCLASS64 ? kElf64 : kElf32);
  return reader.read();
}

std::vector<std::string> exported_names_in_section(const SymbolTable& table,
                                                   std::string_view section) {
  std::vector<std::string> names;
  for (const Symbol& symbol : table.symbols) {
    if (!symbol.section.empty() && symbol.section == section && !symbol.name.empty() &&
        symbol.binding != STB_LOCAL && symbol.visibility == STV_DEFAULT && symbol.size != 0) {
      names.push_back(symbol.name);
    }
  }
  return names;
}

}  // namespace trainyard::elf
