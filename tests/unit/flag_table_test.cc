// The host's declarative flag tables (apps/trainyard/flag_table.h): a row's type and default come
// from its field in pipeline.proto, a given flag sets its field, a filling flag also sets an
// unset field to its default and leaves a config's value alone, and a row naming no scalar field
// is a table error.
#include "flag_table.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "command_flags.h"
#include "flag_tables.h"

namespace trainyard::app {
namespace {

namespace po = boost::program_options;

constexpr const char* kGroup = "Test";

constexpr ConfigFlag kRows[] = {
    {"batch_size", "train_config.batch_size", kGroup, "examples per batch", Apply::kFill},
    {"clip_gradient_norm", "train_config.clip_gradient_norm", kGroup, "clip"},
    {"max_steps", "train_config.max_steps", kGroup, "stop"},
    {"deterministic", "train_input_reader.deterministic", kGroup, "order"},
    {"eval_name", "eval_config.name", kGroup, "name"},
    {"seed", "train_config.seed", kGroup, "seed"},
    {"base_learning_rate",
     "train_config.learning_rate.exponential_decay_examples.base_learning_rate", kGroup, "rate",
     Apply::kCommand},
    {"other_group", "train_config.max_to_keep", "Elsewhere", "kept"},
};

po::variables_map parse(const po::options_description& flags, std::vector<std::string> args) {
  po::parsed_options parsed =
      po::command_line_parser(args).options(flags).style(kNoGuessing).allow_unregistered().run();
  apply_absl_conventions(parsed, flags);
  po::variables_map vm;
  po::store(parsed, vm);
  po::notify(vm);
  return vm;
}

po::options_description flags_of(std::span<const ConfigFlag> rows) {
  po::options_description flags(kGroup);
  add_config_flags(flags, rows, kGroup);
  return flags;
}

TEST(FlagTable, HelpShowsTheFieldsDefaultFromPipelineProtoAndOnlyTheRowsOfTheGroup) {
  std::ostringstream help;
  help << flags_of(kRows);
  const std::string text = help.str();
  EXPECT_NE(text.find("--batch_size arg (=1024)"), std::string::npos) << text;
  EXPECT_NE(text.find("--clip_gradient_norm arg (=1)"), std::string::npos) << text;
  EXPECT_NE(text.find("--base_learning_rate arg (=0.01)"), std::string::npos) << text;
  // max_steps has no default in pipeline.proto (unset: until the input ends).
  EXPECT_NE(text.find("--max_steps arg "), std::string::npos) << text;
  EXPECT_EQ(text.find("--max_steps arg (="), std::string::npos) << text;
  EXPECT_EQ(text.find("--other_group"), std::string::npos) << text;
}

TEST(FlagTable, GivenFlagsSetTheirFieldsTypedAsTheField) {
  const po::options_description flags = flags_of(kRows);
  const po::variables_map vm =
      parse(flags, {"--batch_size=64", "--clip_gradient_norm=0.5", "--max_steps=7",
                    "--deterministic", "--eval_name=holdout", "--seed=18446744073709551615"});
  config::Pipeline p;
  apply_config_flags(vm, kRows, p);
  EXPECT_EQ(p.train_config().batch_size(), 64);
  EXPECT_DOUBLE_EQ(p.train_config().clip_gradient_norm(), 0.5);
  EXPECT_EQ(p.train_config().max_steps(), 7);
  EXPECT_TRUE(p.train_input_reader().deterministic());
  EXPECT_EQ(p.eval_config().name(), "holdout");
  EXPECT_EQ(p.train_config().seed(), 18446744073709551615ULL);
}

TEST(FlagTable, FlagsNotGivenLeaveTheConfigAloneButFillingOnesFillAnUnsetField) {
  const po::options_description flags = flags_of(kRows);
  const po::variables_map vm = parse(flags, {});
  config::Pipeline empty;
  apply_config_flags(vm, kRows, empty);
  EXPECT_TRUE(empty.train_config().has_batch_size());  // kFill
  EXPECT_EQ(empty.train_config().batch_size(), 1024);
  EXPECT_FALSE(empty.train_config().has_clip_gradient_norm());
  EXPECT_FALSE(empty.train_config().has_max_steps());
  EXPECT_FALSE(empty.has_eval_config());
  EXPECT_FALSE(empty.train_input_reader().has_deterministic());

  config::Pipeline configured;
  configured.mutable_train_config()->set_batch_size(32);
  configured.mutable_train_config()->set_clip_gradient_norm(5);
  apply_config_flags(vm, kRows, configured);
  EXPECT_EQ(configured.train_config().batch_size(), 32);
  EXPECT_DOUBLE_EQ(configured.train_config().clip_gradient_norm(), 5);
}

TEST(FlagTable, CommandRowsAreDeclaredButLeftToTheCommand) {
  const po::options_description flags = flags_of(kRows);
  const po::variables_map vm = parse(flags, {"--base_learning_rate=0.5"});
  config::Pipeline p;
  apply_config_flags(vm, kRows, p);
  EXPECT_FALSE(p.train_config().has_learning_rate());
  EXPECT_DOUBLE_EQ(vm["base_learning_rate"].as<double>(), 0.5);
}

TEST(FlagTable, BoolRowsFollowAbslNoPrefixAndLastValueWins) {
  const po::options_description flags = flags_of(kRows);
  config::Pipeline p;
  apply_config_flags(parse(flags, {"--deterministic", "--nodeterministic"}), kRows, p);
  EXPECT_TRUE(p.train_input_reader().has_deterministic());
  EXPECT_FALSE(p.train_input_reader().deterministic());
  apply_config_flags(parse(flags, {"--max_steps=3", "--max_steps=9"}), kRows, p);
  EXPECT_EQ(p.train_config().max_steps(), 9);
}

TEST(FlagTable, ARowNamingNoScalarFieldIsATableErrorNamingTheFlagAndThePath) {
  const ConfigFlag missing[] = {{"bogus", "train_config.no_such_field", kGroup, "x"}};
  const ConfigFlag message[] = {{"section", "train_config.learning_rate", kGroup, "x"}};
  const ConfigFlag repeated[] = {{"scopes", "train_config.checkpoint_exclude_scopes", kGroup, "x"}};
  for (std::span<const ConfigFlag> rows :
       {std::span<const ConfigFlag>(missing), std::span<const ConfigFlag>(message),
        std::span<const ConfigFlag>(repeated)}) {
    po::options_description flags(kGroup);
    try {
      add_config_flags(flags, rows, kGroup);
      ADD_FAILURE() << "no error for " << rows[0].field;
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--") + rows[0].flag), std::string::npos);
      EXPECT_NE(std::string(e.what()).find(rows[0].field), std::string::npos);
    }
  }
}

// Every row of the host's own tables names a scalar field: declaring them all throws nothing.
TEST(FlagTable, TheHostsTablesNameScalarFields) {
  for (std::span<const ConfigFlag> table :
       {std::span<const ConfigFlag>(kTrainFlags), std::span<const ConfigFlag>(kEvalFlags),
        std::span<const ConfigFlag>(kInputFlags)}) {
    for (const ConfigFlag& row : table) {
      po::options_description flags(row.group);
      EXPECT_NO_THROW(add_config_flags(flags, std::span<const ConfigFlag>(&row, 1), row.group))
          << row.flag;
    }
  }
}

// The input flags declare the train side's field; eval applies the same flag to its own section,
// whose default pipeline.proto keeps equal (one default per flag, whichever command reads it).
TEST(FlagTable, InputFlagsDefaultsAreTheSameForTrainAndEval) {
  const config::Pipeline defaults;
  EXPECT_EQ(defaults.train_config().batch_size(), defaults.eval_config().batch_size());
  EXPECT_EQ(defaults.train_input_reader().num_readers(),
            defaults.eval_input_reader().num_readers());
  po::options_description flags(kInputGroup);
  add_config_flags(flags, kInputFlags, kInputGroup);
  po::variables_map vm;
  po::store(po::command_line_parser(std::vector<std::string>{}).options(flags).run(), vm);
  EXPECT_EQ(vm["batch_size"].as<int64_t>(), 1024);
  EXPECT_EQ(vm["num_readers"].as<int>(), 8);
  EXPECT_EQ(vm["num_classes"].as<int64_t>(), 3862);
}

}  // namespace
}  // namespace trainyard::app
