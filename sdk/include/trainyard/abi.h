// The binary contract between the host and a plugin library.
//
// Plugin classes cross the library boundary as C++ objects with virtual interfaces, so a
// plugin must be built against the same SDK ABI, by the same compiler family and with the
// same libstdc++ string/list ABI as the host. The host reads these stamps from a plugin's
// descriptor (plugin.h) before it calls anything else in the library, and refuses a library
// whose stamps differ, naming the file.
//
// kSdkAbiVersion changes whenever a header in sdk/include/trainyard changes the layout of a
// type or the signature of a virtual function that plugins and the host share. A layout change
// that missed the bump is still caught: the descriptor carries a stamp of the shared types'
// sizes, alignments and offsets (abi_layout.h), and the host refuses one that differs from its
// own. The compiler family is also spelt in the exported ABI symbol (tyabi_<N>_gcc), so the
// host lists a plugin of another family as a problem without loading it.
#ifndef TRAINYARD_ABI_H_
#define TRAINYARD_ABI_H_

#include <cstdint>

// Bump on every incompatible change to the SDK's types (see above). Also spelled as a macro
// because the plugin entry point encodes it in an exported symbol name.
#define TRAINYARD_SDK_ABI_VERSION 10

#define TRAINYARD_VERSION_MAJOR 0
#define TRAINYARD_VERSION_MINOR 1
#define TRAINYARD_VERSION_PATCH 0
#define TRAINYARD_VERSION_STRING "0.1.0"

namespace trainyard {

inline constexpr uint32_t kSdkAbiVersion = TRAINYARD_SDK_ABI_VERSION;

enum class CompilerFamily : uint32_t { kUnknown = 0, kGcc = 1, kClang = 2 };

// The compiler that is compiling this translation unit.
inline constexpr CompilerFamily kThisCompilerFamily =
#if defined(__clang__)
    CompilerFamily::kClang;
#elif defined(__GNUC__)
    CompilerFamily::kGcc;
#else
    CompilerFamily::kUnknown;
#endif

// 1 when std::string and std::list use libstdc++'s C++11 layout, 0 for the old COW layout.
inline constexpr uint32_t kThisLibstdcxxCxx11Abi =
#if defined(_GLIBCXX_USE_CXX11_ABI)
    _GLIBCXX_USE_CXX11_ABI;
#else
    1;
#endif

const char* compiler_family_name(CompilerFamily family);

}  // namespace trainyard

#endif  // TRAINYARD_ABI_H_
