// "Did you mean" suggestions.
#include "trainyard/names.h"

#include <gtest/gtest.h>

namespace trainyard {
namespace {

TEST(NamesTest, EditDistanceIgnoresCase) {
  EXPECT_EQ(edit_distance("MoeModel", "moemodel"), 0u);
  EXPECT_EQ(edit_distance("MoeModle", "MoeModel"), 2u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(NamesTest, NearestNameSuggestsOnlyLikelyTypos) {
  std::vector<std::string> models = {"LogisticModel", "MoeModel", "DbofModel"};
  EXPECT_EQ(nearest_name("MoeModle", models), "MoeModel");
  EXPECT_EQ(nearest_name("logisticmodel", models), "LogisticModel");
  EXPECT_EQ(nearest_name("CompletelyDifferent", models), "");
  EXPECT_EQ(nearest_name("x", {}), "");
}

TEST(NamesTest, JoinNames) {
  EXPECT_EQ(join_names({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(join_names({}), "");
  EXPECT_EQ(join_names({"x", "y"}, " and "), "x and y");
}

}  // namespace
}  // namespace trainyard
