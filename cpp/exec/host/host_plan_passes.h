// The planner's passes over a Plan, each in a file of its own job; MakePlan (host_plan.cc) runs them
// in order. Each pass's comment, at its definition, says what it decides.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "exec/host/host_plan.h"
#include "mps/graph.h"

namespace jmp::exec::host {

// host_plan_fold.cc
void FoldConstants(Plan& plan);

// host_plan_views.cc
std::vector<uint8_t> OutputRoots(const Plan& plan);
std::optional<SliceView> BlockOf(const mps::Graph& g, int data, int indices);
void FindSliceViews(Plan& plan);

// host_plan_carries.cc
std::vector<int> StepOf(const Plan& plan);
void FindInPlaceCarries(Plan& plan, const std::vector<int>& uses);
void FindCarryUpdates(Plan& plan, const std::vector<int>& producer);

// host_plan_matmul.cc
void FoldMatMulTransposes(Plan& plan, const std::vector<int>& producer);
void FoldMatMulAccumulates(Plan& plan, const std::vector<int>& producer);
void PairMatMuls(Plan& plan, const std::vector<int>& producer);

// host_plan_arena.cc
void AssignArenaSlots(Plan& plan);

}  // namespace jmp::exec::host
