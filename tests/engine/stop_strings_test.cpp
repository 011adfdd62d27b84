#include "engine/stop_strings.h"

#include <gtest/gtest.h>

namespace m2 {
namespace {

TEST(StopStrings, MatchAcrossDeltasIsCutFromOutput) {
  StopStringMatcher m({"STOP"});
  std::string out;
  for (std::string d : {"hello S", "T", "O", "Px tail"}) {
    auto hit = m.append(d);
    if (hit) {
      out += m.take_emittable(true);
      EXPECT_EQ(*hit, 0u);
      break;
    }
    out += m.take_emittable(false);
  }
  EXPECT_EQ(out, "hello ");
  EXPECT_EQ(m.text(), "hello ");
}

TEST(StopStrings, HoldsBackOnlyWhatCouldStartAStop) {
  StopStringMatcher m({"abc"});
  m.append("xyzab");
  EXPECT_EQ(m.take_emittable(false), "xyz");  // "ab" might become "abc"
  m.append("d");  // "abd" can no longer become "abc"
  EXPECT_EQ(m.take_emittable(false), "abd");
  m.append("xa");
  EXPECT_EQ(m.take_emittable(false), "x");
  EXPECT_EQ(m.take_emittable(true), "a");
}

TEST(StopStrings, EarliestOfSeveralWins) {
  StopStringMatcher m({"world", "lo w"});
  auto hit = m.append("hello world");
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, 1u);
  EXPECT_EQ(m.text(), "hel");
}

TEST(StopStrings, NeverSplitsUtf8) {
  StopStringMatcher m({"zz"});
  StopStringMatcher u({"\xc3\xa9\xc3\xa9"});  // "éé": a held-back suffix may start inside é
  u.append("a\xc3\xa9\xc3");
  EXPECT_EQ(u.take_emittable(false), "a");
  EXPECT_EQ(u.take_emittable(true), "\xc3\xa9\xc3");
  m.append("b\xc3\xa9");
  EXPECT_EQ(m.take_emittable(false), "b\xc3\xa9");
}

TEST(StopStrings, ChecksCanBeSuspended) {
  StopStringMatcher m({"x"});
  EXPECT_FALSE(m.append("x", false).has_value());  // below min_tokens
  EXPECT_TRUE(m.append("yx").has_value());
  EXPECT_EQ(m.text(), "xy");
}

}  // namespace
}  // namespace m2
