#include "trainyard/variable.h"

#include "trainyard/error.h"

namespace trainyard {

Variable::Variable(VariableSpec spec, Tensor value) : spec_(std::move(spec)) {
  assign(std::move(value));
}

void Variable::assign(Tensor value) {
  if (value.shape() != spec_.shape || value.dtype() != spec_.dtype) {
    throw InvalidArgument("variable '" + spec_.name + "' is " + dtype_name(spec_.dtype) +
                          spec_.shape.to_string() + ", cannot assign " + dtype_name(value.dtype()) +
                          value.shape().to_string());
  }
  value_ = std::move(value);
}

}  // namespace trainyard
