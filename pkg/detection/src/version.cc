// The detection package's version string (a library needs one source before the others land).
#include "trainyard/pkg/detection/version.h"

namespace trainyard::detection {

const char* package_name() { return "trainyard_pkg_detection"; }

}  // namespace trainyard::detection
