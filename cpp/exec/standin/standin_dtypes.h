// The element types each MPSGraph call accepts, where Apple's header or the limits Apple's PyTorch MPS
// backend records narrow them; a call without a row accepts every MPSDataType.
#pragma once

#include <string_view>
#include <vector>

#include "exec/metal/metal_api.h"

namespace jmp::exec::standin {

struct AcceptedTypes {
  std::vector<metal::DataType> types;
  std::string_view source;  // where the limit is stated, for the message
};

// The row for a selector ("matrixMultiplicationWithPrimaryTensor"), or null: any type.
const AcceptedTypes* AcceptedTypesOf(std::string_view selector);

// Indices of gatherND/scatterND, and of the along-axis gathers and scatters.
const AcceptedTypes& NDIndexTypes();
const AcceptedTypes& AlongAxisIndexTypes();

}  // namespace jmp::exec::standin
