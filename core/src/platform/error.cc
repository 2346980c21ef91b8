#include "trainyard/error.h"

namespace trainyard {

Error::Error(const std::string& message) : std::runtime_error(message) {}
Error::~Error() = default;
InvalidArgument::~InvalidArgument() = default;
NotFound::~NotFound() = default;
PluginError::~PluginError() = default;
ConfigError::~ConfigError() = default;
DataLoss::~DataLoss() = default;
Unimplemented::~Unimplemented() = default;

}  // namespace trainyard
