// op_kinds.def's domain column: the element types a row computes on. Each domain name is spelled out
// once, here, as its classes: for the preprocessor (JMP_DOMAIN_LACKS, from which the host's
// elementwise kernels generate the cases a row's domain leaves out) and for mps::OpKindDomain (the
// verifier's check).
#pragma once

// JMP_DOMAIN_<name>(m, x) is m(float, int, bool, complex, x). float: 0 none, 1 every float type (f16,
// bf16, f32, f64), 2 f32 and f64, 3 f16, bf16 and f32, 4 f16, f32 and f64. int: 0 none, 1 every
// integer type, 8 to 64 bits, signed and unsigned, 2 int32 and int64. complex: c64 and c128.
#define JMP_DOMAIN_Any(m, x) m(1, 1, 1, 1, x)
#define JMP_DOMAIN_Numeric(m, x) m(1, 1, 0, 1, x)
#define JMP_DOMAIN_Real(m, x) m(1, 1, 0, 0, x)
#define JMP_DOMAIN_Float(m, x) m(1, 0, 0, 0, x)
#define JMP_DOMAIN_FloatComplex(m, x) m(1, 0, 0, 1, x)
#define JMP_DOMAIN_Int(m, x) m(0, 1, 0, 0, x)
#define JMP_DOMAIN_Bool(m, x) m(0, 0, 1, 0, x)
#define JMP_DOMAIN_Complex(m, x) m(0, 0, 0, 1, x)
#define JMP_DOMAIN_Float32Or64(m, x) m(2, 0, 0, 0, x)
#define JMP_DOMAIN_FloatUpTo32(m, x) m(3, 0, 0, 0, x)
#define JMP_DOMAIN_Float32Or64Complex(m, x) m(2, 0, 0, 1, x)
// What MPSGraph's sorts and min/max reductions take (as Apple's PyTorch backend uses them): the
// lowering maps other real types onto these, order preserved.
#define JMP_DOMAIN_Ordered(m, x) m(4, 2, 0, 0, x)

// `x` when `domain` has no type of the class (FLOAT, INT, BOOL or COMPLEX), else nothing.
#define JMP_DOMAIN_LACKS(domain, cls, x) JMP_DOMAIN_##domain(JMP_DOMAIN_LACKS_##cls, x)
#define JMP_DOMAIN_LACKS_FLOAT(f, i, b, c, x) JMP_DOMAIN_IF_NONE_##f(x)
#define JMP_DOMAIN_LACKS_INT(f, i, b, c, x) JMP_DOMAIN_IF_NONE_##i(x)
#define JMP_DOMAIN_LACKS_BOOL(f, i, b, c, x) JMP_DOMAIN_IF_NONE_##b(x)
#define JMP_DOMAIN_LACKS_COMPLEX(f, i, b, c, x) JMP_DOMAIN_IF_NONE_##c(x)
#define JMP_DOMAIN_IF_NONE_0(x) x
#define JMP_DOMAIN_IF_NONE_1(x)
#define JMP_DOMAIN_IF_NONE_2(x)
#define JMP_DOMAIN_IF_NONE_3(x)
#define JMP_DOMAIN_IF_NONE_4(x)

// The domain as a DTypeDomain initializer.
#define JMP_DOMAIN_FIELDS(f, i, b, c, x) {f, i, b != 0, c != 0}
