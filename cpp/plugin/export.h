// What the plugin library exports beyond GetPjrtApi: plain C, so that one library serves every Python.
#pragma once

#define JMP_EXPORT extern "C" __attribute__((visibility("default")))
