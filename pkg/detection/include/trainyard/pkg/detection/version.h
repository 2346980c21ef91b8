// The detection package's name, for messages and `plugins list`.
#ifndef TRAINYARD_PKG_DETECTION_VERSION_H_
#define TRAINYARD_PKG_DETECTION_VERSION_H_

namespace trainyard::detection {

const char* package_name();

}  // namespace trainyard::detection

#endif  // TRAINYARD_PKG_DETECTION_VERSION_H_
