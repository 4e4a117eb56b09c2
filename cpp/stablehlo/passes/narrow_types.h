// Narrow element types (int4, uint4, float8 in all its formats, float4_e2m1fn): MPSGraph has none of them, so before
// lowering, a StableHLO -> StableHLO rewrite turns every op on them into ops on their storage type
// (support/dtype.h StorageOf) that the lowering already knows, with the re-normalisation each needs.
#pragma once

#include "stablehlo/ir.h"
#include "support/status.h"

namespace jmp::shlo {

// Whether any function of the module holds a value of a narrow type.
bool HasNarrowTypes(const shlo::Module& module);

// The same program without narrow types:
// - int4/uint4 compute as int8 (sign-extended) / uint8; a result that can leave the 4-bit range is
//   wrapped back to it (two's complement: shift left 4, shift right 4). @main's int4 arguments arrive
//   as ml_dtypes lays them out (the 4-bit pattern in a byte's low nibble) and are sign-extended on
//   entry; its int4 results are masked back to that layout on exit.
// - float8 and float4 values are uint8 bit patterns. Moving data (reshape, slice, gather, select, ...)
//   works on them as they are; any other op decodes its narrow float operands to float32 (exactly),
//   computes in float32 and encodes its narrow float results, rounding once to nearest-even with the
//   format's rules (stablehlo/passes/narrow_types.cc kNarrowFloats: e5m2/e4m3/e3m4 have infinities; e4m3fn's and
//   e8m0fnu's all-ones code is NaN; the fnuz formats' 0x80 is NaN and their zero unsigned; float4_e2m1fn
//   saturates), the sign kept. That is what XLA:CPU does (checked bit for bit against it by the tests).
// - convert and bitcast_convert to, from and between them follow StableHLO (XLA:CPU for float ->
//   int4: saturating, NaN -> 0); a bitcast between a 2- or 4-bit type and a wider one splits or joins
//   its lanes, element 0 in the low bits.
// An op it cannot rewrite (custom_call, rng, ... on a narrow type) is an Unimplemented status naming
// the op, the type and the source line.
StatusOr<shlo::Module> LegalizeNarrowTypes(const shlo::Module& module);

}  // namespace jmp::shlo
