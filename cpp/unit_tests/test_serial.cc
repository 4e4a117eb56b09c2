// What a persistent-cache entry is made of: the MPS op graph as bytes (every field survives, damaged
// bytes are refused before any executor sees them), MPSGraph packages as directories packed into bytes
// (no path leaves the target directory), and the segment runner loading what it serialized.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include "exec/executor.h"
#include "exec/package_archive.h"
#include "mps/graph_serial.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;

// Ops of several attribute kinds, so that a round trip carries each kind's fields.
mps::Graph SampleGraph() {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {2, 3});
  int t = b.Apply(OpKind::kTranspose, {x}, DType::kF32, {3, 2}, [](mps::Op& op) {
    op.attrs = mps::PermutationAttrs{{1, 0}};
    op.location = "loc(\"f.py\":3:4)";
  });
  int s = b.Apply(OpKind::kReductionSum, {t}, DType::kF32, {3, 1}, [](mps::Op& op) { op.attrs = mps::AxesAttrs{{1}}; });
  b.Output(b.Apply(OpKind::kNegative, {s}, DType::kF32, {3, 1}));
  b.Output(x);
  int p = b.Apply(OpKind::kPad, {x}, DType::kF32, {3, 5},
                  [](mps::Op& op) { op.attrs = mps::PadAttrs{{1, 0}, {0, 2}, 1.5}; });
  int c = b.Apply(OpKind::kSlice, {p}, DType::kF32, {2, 2},
                  [](mps::Op& op) { op.attrs = mps::SliceAttrs{{0, 1}, {3, 5}, {2, 2}}; });
  c = b.Apply(OpKind::kCumulativeSum, {c}, DType::kF32, {2, 2},
              [](mps::Op& op) { op.attrs = mps::CumulativeAttrs{1, true, true}; });
  b.Output(b.Apply(OpKind::kSort, {c}, DType::kF32, {2, 2}, [](mps::Op& op) { op.attrs = mps::SortAttrs{0, true}; }));
  return b.graph();
}

StatusOr<mps::Graph> RoundTrip(const std::string& bytes) {
  ByteReader in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "test bytes");
  return mps::ReadGraph(in);
}

JMP_TEST(GraphSerial, RoundTripKeepsEveryField) {
  const mps::Graph g = SampleGraph();
  ByteWriter out;
  mps::WriteGraph(g, out);
  StatusOr<mps::Graph> back = RoundTrip(out.str());
  ASSERT_OK(back);
  EXPECT_TRUE(back->ToString() == g.ToString());
  for (size_t i = 0; i < g.ops.size(); ++i) {  // AttrsToString prints every field of these kinds
    EXPECT_SAME(back->ops[i].attrs.index(), g.ops[i].attrs.index());
    EXPECT_TRUE(mps::AttrsToString(back->ops[i].attrs) == mps::AttrsToString(g.ops[i].attrs));
  }
  EXPECT_TRUE(back->ops[0].location == g.ops[0].location);
  EXPECT_SAME(back->outputs, g.outputs);
  EXPECT_SAME(back->inputs, g.inputs);
}

// Every alternative of OpAttrs with fields away from their defaults, one op each (the kinds do not
// matter to the serializer): each must come back as it went in, and writing what was read must give the
// same bytes, so no field is dropped, reordered or written in a form its reader does not take.
JMP_TEST(GraphSerial, EveryAttributeAlternativeRoundTrips) {
  const std::vector<mps::OpAttrs> every = {
      mps::NoAttrs{},
      mps::ConstantAttrs{{1, 2, 3}},
      mps::AxisAttrs{-2},
      mps::AxesAttrs{{0, 2}},
      mps::PermutationAttrs{{2, 0, 1}},
      mps::SliceAttrs{{0, 1}, {4, 5}, {1, 2}},
      mps::PadAttrs{{1, 2}, {3, 4}, -0.5},
      mps::SortAttrs{3, true},
      mps::TopKAttrs{7},
      mps::CumulativeAttrs{1, true, false},
      mps::FFTAttrs{{1, 2}, true},
      mps::GatherNDAttrs{2},
      mps::ScatterAttrs{mps::ScatterMode::kMax, 3},
      mps::Conv2DAttrs{{1, 2}, {2, 1}, {0, 1}, {1, 0}, 3},
      mps::Pool4DAttrs{{1, 2, 2, 1}, {1, 2, 2, 1}, {0, 1, 0, 0}, {0, 0, 1, 0}},
      mps::LapackAttrs{true, false, true, false, true, false, true, false, true, false, true},
      mps::RngAttrs{mps::RngAlgorithm::kThreeFry},
      mps::PythonCallbackAttrs{5, 2},
      mps::MetalKernelAttrs{"kernel void k() {}", "k", {8, 4, 2}, {4, 2, 1}},
      mps::AllReduceAttrs{mps::OpKind::kMaximum, {2, 0, 1}, {1, 0, 0}},
  };
  EXPECT_SAME(every.size(), std::variant_size_v<mps::OpAttrs>);
  for (size_t i = 0; i < every.size(); ++i) EXPECT_SAME(every[i].index(), i);
  for (const mps::OpAttrs& attrs : every) {
    ByteWriter out;
    mps::WriteAttrs(attrs, out);
    ByteReader in(reinterpret_cast<const uint8_t*>(out.str().data()), out.str().size(), "test bytes");
    StatusOr<mps::OpAttrs> back = mps::ReadAttrs(in);
    ASSERT_OK(back);
    EXPECT_SAME(back->index(), attrs.index());
    EXPECT_TRUE(mps::AttrsToString(*back) == mps::AttrsToString(attrs));
    ByteWriter again;
    mps::WriteAttrs(*back, again);
    EXPECT_TRUE(again.str() == out.str());
  }
  // The two fields AttrsToString prints only by size.
  ByteWriter out;
  mps::WriteAttrs(every[1], out);
  mps::WriteAttrs(every[static_cast<size_t>(mps::AttrsKind::kMetalKernelAttrs)], out);
  ByteReader in(reinterpret_cast<const uint8_t*>(out.str().data()), out.str().size(), "test bytes");
  StatusOr<mps::OpAttrs> constant = mps::ReadAttrs(in);
  ASSERT_OK(constant);
  StatusOr<mps::OpAttrs> kernel = mps::ReadAttrs(in);
  ASSERT_OK(kernel);
  EXPECT_TRUE(std::get<mps::ConstantAttrs>(*constant).data == std::get<mps::ConstantAttrs>(every[1]).data);
  EXPECT_TRUE(std::get<mps::MetalKernelAttrs>(*kernel).source ==
              std::get<mps::MetalKernelAttrs>(every[static_cast<size_t>(mps::AttrsKind::kMetalKernelAttrs)]).source);
}

JMP_TEST(GraphSerial, EveryTruncationIsRefused) {
  ByteWriter out;
  mps::WriteGraph(SampleGraph(), out);
  const std::string bytes = out.str();
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_TRUE(!RoundTrip(bytes.substr(0, n)).ok());
}

JMP_TEST(GraphSerial, DamageIsRefusedWithoutACrash) {
  ByteWriter out;
  mps::WriteGraph(SampleGraph(), out);
  const std::string good = out.str();
  // Each byte set to 0xff in turn: an unknown kind, a huge count or an id out of range must be caught
  // by the reader or VerifyGraph; what still reads back must verify.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(0xff);
    StatusOr<mps::Graph> g = RoundTrip(bad);
    if (!g.ok()) EXPECT_TRUE(g.status().message().find("test bytes") != std::string::npos);
  }
  ByteWriter wrong;
  mps::Graph g = SampleGraph();
  g.ops[1].inputs = {99};
  mps::WriteGraph(g, wrong);
  EXPECT_ERROR(RoundTrip(wrong.str()).status(), "fails verification");
}

JMP_TEST(PackageArchive, RoundTripOfADirectoryTree) {
  StatusOr<std::string> dir = exec::MakeTemporaryDirectory();
  ASSERT_OK(dir);
  std::filesystem::create_directories(*dir + "/pkg/sub");
  std::ofstream(*dir + "/pkg/a.bin", std::ios::binary) << std::string("\0\1\2abc", 6);
  std::ofstream(*dir + "/pkg/sub/b.json", std::ios::binary) << "{}";
  StatusOr<std::string> packed = exec::PackDirectory(*dir + "/pkg");
  ASSERT_OK(packed);
  ASSERT_OK(exec::UnpackDirectory(*packed, *dir + "/copy"));
  StatusOr<std::string> again = exec::PackDirectory(*dir + "/copy");
  ASSERT_OK(again);
  EXPECT_TRUE(*again == *packed);
  std::ifstream f(*dir + "/copy/a.bin", std::ios::binary);
  std::string contents((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contents == std::string("\0\1\2abc", 6));
  exec::RemoveDirectoryTree(*dir);
  EXPECT_TRUE(!std::filesystem::exists(*dir));
}

JMP_TEST(PackageArchive, PathsThatLeaveTheDirectoryAreRefused) {
  StatusOr<std::string> dir = exec::MakeTemporaryDirectory();
  ASSERT_OK(dir);
  for (const char* name : {"../escape", "/etc/passwd", "a/../../b", "", "a//b", "./a"}) {
    ByteWriter w;
    w.U64(1);
    w.Bytes(name);
    w.Bytes("x");
    EXPECT_ERROR(exec::UnpackDirectory(w.str(), *dir + "/out"), "not a plain relative path");
  }
  ByteWriter huge;
  huge.U64(1);
  huge.U64(uint64_t{1} << 60);  // a name longer than the bytes
  EXPECT_ERROR(exec::UnpackDirectory(huge.str(), *dir + "/out"), "truncated");
  EXPECT_TRUE(!std::filesystem::exists(*dir + "/escape"));
  exec::RemoveDirectoryTree(*dir);
}

// The placed executor (a Mac's cuts, host executors) serializes a two-segment program as its placement's
// fingerprint and its segments' bytes, and loads it back to the same results; bytes made for another
// placement, or that are no such list, are not loaded into these segments: the program is compiled again.
JMP_TEST(SegmentedExecutor, LoadsWhatItSerialized) {
  GraphBuilder b;
  int x = b.Input(DType::kF64, {4});
  int y = b.Apply(OpKind::kNegative, {x}, DType::kF64, {4});  // float64: a host segment on a Mac
  int z = b.Apply(OpKind::kCast, {y}, DType::kF32, {4});
  b.Output(b.Apply(OpKind::kExponent, {z}, DType::kF32, {4}));
  auto executor = exec::CreateSegmentedExecutor(exec::CreateHostExecutor(), exec::CreateHostExecutor());
  StatusOr<std::unique_ptr<exec::Executable>> compiled = executor->Compile(b.graph());
  ASSERT_OK(compiled);
  StatusOr<std::string> bytes = (*compiled)->Serialize();
  ASSERT_OK(bytes);
  EXPECT_SAME((*compiled)->device_graphs_per_run, 1);  // the float32 exp: one Metal segment after a host one
  const std::vector<double> in = {0.5, -1, 2, 0};
  auto fresh = RunExecutable(*executor, **compiled, b.graph(), {Bytes(in)});
  ASSERT_OK(fresh);
  const std::vector<float> want = Values<float>(fresh.value()[0]);  // a load computes as the compile does
  EXPECT_TRUE(want[1] > 2.7f && want[1] < 2.72f);                   // exp(1)
  GraphBuilder other;  // one segment only: its bytes are another placement's
  int o = other.Input(DType::kF64, {4});
  other.Output(other.Apply(OpKind::kNegative, {o}, DType::kF64, {4}));
  auto other_compiled = executor->Compile(other.graph());
  ASSERT_OK(other_compiled);
  auto other_bytes = (*other_compiled)->Serialize();
  ASSERT_OK(other_bytes);
  ByteWriter wrong;
  wrong.U64(5);
  for (int i = 0; i < 5; ++i) wrong.Bytes("");
  for (const std::string& serialized : {*bytes, *other_bytes, wrong.str()}) {
    StatusOr<std::unique_ptr<exec::Executable>> loaded = executor->Load(b.graph(), serialized);
    ASSERT_OK(loaded);
    EXPECT_SAME((*loaded)->device_graphs_per_run, 1);
    auto r = RunExecutable(*executor, **loaded, b.graph(), {Bytes(in)});
    ASSERT_OK(r);
    EXPECT_SAME(Values<float>(r.value()[0]), want);
  }
}

}  // namespace
}  // namespace jmp::unit
