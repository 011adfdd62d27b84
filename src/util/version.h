// m2cpp's version: `m2cpp --version`, the server's /version, and what the
// nodes of a multi-node job check they share (model/node_group.h).
#pragma once

namespace m2 {
inline constexpr const char* kM2cppVersion = "0.1.0";
}  // namespace m2
