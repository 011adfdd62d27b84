#include "util/status.h"

#include <gtest/gtest.h>

namespace m2 {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return errorf("value {} is not positive", v);
  return v;
}

Result<int> doubled(int v) {
  M2_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status().ok());
  Status e = errorf("bad {}", 7);
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "bad 7");
  EXPECT_EQ(e.with_context("file.json").message(), "file.json: bad 7");
}

TEST(Result, PropagatesErrors) {
  auto ok = doubled(3);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value(), 6);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "value -1 is not positive");
}

}  // namespace
}  // namespace m2

#include "util/json.h"

namespace m2 {
namespace {

TEST(Json, OutOfRangeNumbersAreErrorsNotCrashes) {
  auto j = parse_json("{\"x\": 1e400}", "doc");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("doc"), std::string::npos);
  EXPECT_FALSE(parse_json("{\"x\": [1, 2", "doc").ok());
}

}  // namespace
}  // namespace m2
