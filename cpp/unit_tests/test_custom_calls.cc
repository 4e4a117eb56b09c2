// The custom-call table (stablehlo/custom_calls.def): typed backend_config attributes and their errors,
// every target in it has a lowering rule, and the LAPACK rows' result types (mps/lapack_types.h).
#include <string>

#include "lower/custom_call_config.h"
#include "lower/lower_context.h"
#include "mps/lapack_types.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::CustomCallConfig;

std::string Typed(DType dtype, std::vector<int64_t> shape) {
  return mps::TensorType{dtype, std::move(shape)}.ToString();
}

JMP_TEST(CustomCalls, NamedAttributesAreTyped) {
  auto c = CustomCallConfig::Parse("jax_metal.lapack.svd", "compute_uv=true,full_matrices=0");
  ASSERT_OK(c);
  EXPECT_SAME(c->Bool("compute_uv", false), true);
  EXPECT_SAME(c->Bool("full_matrices", true), false);
  auto id = CustomCallConfig::Parse("jax_metal_python_callback", "callback_id=42");
  ASSERT_OK(id);
  EXPECT_SAME(id->Int("callback_id", -1), int64_t{42});
  auto empty = CustomCallConfig::Parse("jax_metal.lapack.eigh", "");
  ASSERT_OK(empty);
  EXPECT_SAME(empty->Bool("lower", true), true);  // absent: the rule's default
}

JMP_TEST(CustomCalls, PositionalAttributesAsJaxWritesThem) {
  auto c = CustomCallConfig::Parse("Eigh", "0,1,100,1e-6");
  ASSERT_OK(c);
  EXPECT_SAME(c->Bool("lower", true), false);
  EXPECT_SAME(c->Bool("sort_eigenvalues", false), true);
  EXPECT_SAME(c->Int("max_sweeps", 0), int64_t{100});
  EXPECT_SAME(c->Float("tol", 0), 1e-6);
  auto gaps = CustomCallConfig::Parse("Eigh", ",,7");
  ASSERT_OK(gaps);
  EXPECT_SAME(gaps->Bool("lower", true), true);
  EXPECT_SAME(gaps->Int("max_sweeps", 0), int64_t{7});
}

JMP_TEST(CustomCalls, MalformedAttributesNameTheTargetAndTheAttribute) {
  auto status = [](std::string_view target, std::string_view text) {
    return CustomCallConfig::Parse(target, text).status();
  };
  EXPECT_ERROR(status("jax_metal.lapack.svd", "full_matrices=maybe"),
               "custom_call jax_metal.lapack.svd: backend_config attribute 'full_matrices': 'maybe' is not a bool");
  EXPECT_ERROR(status("jax_metal.lapack.svd", "full_matrices=1,speed=3"),
               "unknown attribute 'speed' (attributes: full_matrices:bool, compute_uv:bool)");
  EXPECT_ERROR(status("jax_metal.lapack.svd", "1,0"), "'1' is not name=value");
  EXPECT_ERROR(status("jax_metal.lapack.eigh", "lower=1,lower=0"), "repeats attribute 'lower'");
  EXPECT_ERROR(status("jax_metal_python_callback", "callback_id=12x"), "'12x' is not a int");
  EXPECT_ERROR(status("jax_metal_python_callback", "callback_id=99999999999999999999"), "is not a int");
  EXPECT_ERROR(status("Eigh", "1,1,100,1e-6,5"), "has 5 fields, expected at most 4");
  EXPECT_ERROR(status("Eigh", "1,1,100,nan"), "attribute 'tol': 'nan' is not a float");
  EXPECT_ERROR(status("no.such.target", "x=1"), "custom_call 'no.such.target' has no attribute table");
}

JMP_TEST(CustomCalls, EveryTargetOfTheTableHasALoweringRule) {
  const auto& rules = mps::LowerRules();
  int missing = 0;
  auto check = [&](const char* target) {
    if (!rules.count(std::string("custom_call:") + target)) {
      jmp_test_.Fail(__FILE__, __LINE__, std::string("no rule for custom_call ") + target);
      ++missing;
    }
  };
#define JMP_PASS_THROUGH_TARGET(target) check(target);
#define JMP_CUSTOM_CALL(id, target, format) check(target);
#include "stablehlo/custom_calls.def"
  EXPECT_SAME(missing, 0);
}

JMP_TEST(LapackTypes, ResultsFollowTheRows) {
  using K = mps::OpKind;
  const mps::TensorType a{DType::kF64, {2, 5, 3}};
  mps::LapackAttrs flags;
  auto lu = mps::LapackResultTypes(K::kLapackLu, {a}, flags);
  ASSERT_OK(lu);
  EXPECT_SAME(lu->size(), size_t{3});
  EXPECT_SAME((*lu)[1].ToString(), Typed(DType::kI32, {2, 3}));
  EXPECT_SAME((*lu)[2].ToString(), Typed(DType::kI32, {2, 5}));
  flags.compute_uv = true;
  auto svd = mps::LapackResultTypes(K::kLapackSvd, {{DType::kC64, {5, 3}}}, flags);
  ASSERT_OK(svd);
  EXPECT_SAME((*svd)[0].ToString(), Typed(DType::kF32, {3}));
  EXPECT_SAME((*svd)[1].ToString(), Typed(DType::kC64, {5, 3}));
  EXPECT_SAME((*svd)[2].ToString(), Typed(DType::kC64, {3, 3}));
  auto eig = mps::LapackResultTypes(K::kLapackEig, {{DType::kF64, {4, 4}}}, {});
  ASSERT_OK(eig);
  EXPECT_SAME((*eig)[0].ToString(), Typed(DType::kC128, {4}));
  EXPECT_ERROR(mps::LapackResultTypes(K::kLapackEigh, {a}, {}).status(), "needs square matrices");
  EXPECT_ERROR(mps::LapackResultTypes(K::kLapackQr, {{DType::kI32, {3, 3}}}, {}).status(), "floating matrix");
  EXPECT_ERROR(mps::LapackResultTypes(K::kAdd, {a}, {}).status(), "not a LAPACK op");
}

}  // namespace
}  // namespace jmp::unit
