// The plugin registry against the fixture plugins in tests/fixtures: listing without running
// plugin code, loading on first use, lifetime, and every bad-plugin case with its message.
#include "trainyard/core/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "trainyard/backend.h"
#include "trainyard/loss.h"
#include "trainyard/model.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& name) { return fs::path(TRAINYARD_FIXTURE_DIR) / name; }

PluginRegistry only(std::vector<std::string> names) {
  PluginRegistry::Settings settings;
  for (const std::string& n : names) settings.plugin_path.push_back(fixture(n));
  settings.use_environment = false;
  settings.use_default_dirs = false;
  return PluginRegistry(settings);
}

std::string all_problems(const PluginRegistry& registry) {
  std::string out;
  for (const LibraryProblem& p : registry.problems()) out += p.message + "\n";
  return out;
}

template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A context for models that never use it.
class UnusedContext final : public ModelContext {
 public:
  Backend& backend() override { throw Unimplemented("UnusedContext::backend"); }
  int64_t num_classes() const override { return 0; }
  Variable& variable(const VariableSpec&) override { throw Unimplemented("UnusedContext"); }
  uint64_t seed() const override { return 0; }
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(RegistryTest, ListsClassesFromSymbolTable) {
  PluginRegistry registry = only({"good"});
  EXPECT_EQ(all_problems(registry), "");
  ASSERT_EQ(registry.classes().size(), 2u);
  const ClassInfo& model = registry.classes()[0];
  EXPECT_EQ(model.kind, ClassKind::kModel);
  EXPECT_EQ(model.class_name, "FixtureModel");
  EXPECT_EQ(model.plugin_name, "fixture_good");
  EXPECT_EQ(model.plugin_version, "1.2.3");
  EXPECT_EQ(model.library.filename(), "libfixture_good.so");
  EXPECT_EQ(model.abi_version, kSdkAbiVersion);
  EXPECT_EQ(registry.classes()[1].class_name, "FixtureLoss");
  EXPECT_EQ(registry.classes()[1].kind, ClassKind::kLoss);
}

TEST(RegistryTest, ListingRunsNoPluginCodeAndCreatingLoadsTheLibrary) {
  fs::path marker = fs::temp_directory_path() / ("trainyard_marker_" + std::to_string(getpid()));
  fs::remove(marker);
  ::setenv("TRAINYARD_FIXTURE_MARKER", marker.c_str(), 1);
  PluginRegistry registry = only({"static_init"});
  ASSERT_EQ(registry.classes().size(), 1u);
  EXPECT_EQ(registry.classes()[0].class_name, "MarkerLoss");
  EXPECT_FALSE(fs::exists(marker)) << "listing ran the plugin's static initialisers";
  EXPECT_EQ(registry.loaded_library_count(), 0u);

  auto loss = registry.create<Loss>(ClassKind::kLoss, "MarkerLoss");
  EXPECT_TRUE(fs::exists(marker)) << "creating a class did not load its library";
  EXPECT_EQ(registry.loaded_library_count(), 1u);
  fs::remove(marker);
  ::unsetenv("TRAINYARD_FIXTURE_MARKER");
}

TEST(RegistryTest, ObjectsKeepTheirLibraryLoaded) {
  std::shared_ptr<BaseModel> model;
  {
    PluginRegistry registry = only({"good"});
    model = registry.create<BaseModel>(ClassKind::kModel, "FixtureModel");
    EXPECT_EQ(registry.loaded_library_count(), 1u);
  }
  // The registry is gone; the model's code must still be there to run.
  EXPECT_EQ(model->plugin_origin().class_name, "FixtureModel");
  Batch batch;
  UnusedContext ctx;
  EXPECT_THROW(guard_plugin_call(*model, [&] { model->forward(ctx, batch, Mode::kTrain); }),
               PluginError);

  PluginRegistry registry = only({"good"});
  std::weak_ptr<PluginObject> weak;
  {
    auto loss = registry.create<Loss>(ClassKind::kLoss, "FixtureLoss");
    weak = loss;
    EXPECT_EQ(registry.loaded_library_count(), 1u);
  }
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(registry.loaded_library_count(), 0u) << "library stayed loaded after its last object";
}

TEST(RegistryTest, CreatedObjectCarriesItsOrigin) {
  PluginRegistry registry = only({"good"});
  auto model =
      registry.create<BaseModel>(ClassKind::kModel, "FixtureModel", {{"hidden_size", int64_t{32}}});
  const PluginOrigin& origin = model->plugin_origin();
  EXPECT_EQ(origin.plugin_name, "fixture_good");
  EXPECT_EQ(origin.plugin_version, "1.2.3");
  EXPECT_EQ(origin.class_name, "FixtureModel");
  EXPECT_EQ(fs::path(origin.library_path).filename(), "libfixture_good.so");
  EXPECT_EQ(origin.kind, ClassKind::kModel);
}

TEST(RegistryTest, DeclaredOptionsAreDescribedAndChecked) {
  PluginRegistry registry = only({"good"});
  const ClassInfo& info = registry.find(ClassKind::kModel, "FixtureModel");
  PluginRegistry::ClassDeclaration d = registry.describe(info);
  EXPECT_EQ(d.summary, "Returns its input features");
  ASSERT_EQ(d.options.size(), 7u);
  EXPECT_EQ(d.options[1].name, "hidden_size");
  EXPECT_EQ(d.options[1].type, OptionType::kInt);
  EXPECT_EQ(d.options[1].default_value, "16");

  Options resolved = registry.resolve_options(info, {{"hidden_size", int64_t{8}}});
  EXPECT_EQ(resolved.get_int("hidden_size"), 8);
  EXPECT_EQ(resolved.get_string("activation"), "relu");

  std::string m = error_of([&] { registry.create(info, {{"hiden_size", int64_t{8}}}); });
  EXPECT_TRUE(contains(m, "FixtureModel has no option 'hiden_size'")) << m;
  EXPECT_TRUE(contains(m, "Did you mean 'hidden_size'?")) << m;
}

TEST(RegistryTest, UnknownNameListsKnownNamesOfThatKindAndNearest) {
  PluginRegistry registry = only({"good"});
  std::string m = error_of([&] { registry.find(ClassKind::kModel, "FixtureModle"); });
  EXPECT_TRUE(contains(m, "unknown model class 'FixtureModle'")) << m;
  EXPECT_TRUE(contains(m, "Known model classes: FixtureModel.")) << m;
  EXPECT_TRUE(contains(m, "Did you mean 'FixtureModel'?")) << m;
  EXPECT_THROW(registry.find(ClassKind::kModel, "Nothing"), NotFound);

  m = error_of([&] { registry.find(ClassKind::kOptimizer, "AdamOptimizer"); });
  EXPECT_TRUE(contains(m, "No optimizer classes were found; searched ")) << m;
  EXPECT_TRUE(contains(m, "fixtures/good")) << m;
}

TEST(RegistryTest, NameOfAnotherKindSaysWhatKindItIs) {
  PluginRegistry registry = only({"good"});
  std::string m = error_of([&] { registry.find(ClassKind::kModel, "FixtureLoss"); });
  EXPECT_TRUE(contains(m, "'FixtureLoss' is a loss class (plugin 'fixture_good' 1.2.3, ")) << m;
  EXPECT_TRUE(contains(m, "libfixture_good.so), not a model class")) << m;
}

TEST(RegistryTest, LibraryWithoutEntryPointIsNamedAndSkipped) {
  PluginRegistry registry = only({"no_entry", "not_a_plugin", "good"});
  std::string problems = all_problems(registry);
  EXPECT_TRUE(contains(problems,
                       "libfixture_no_entry.so is not a Trainyard plugin: it exports no "
                       "'trainyard_plugin_entry' entry point"))
      << problems;
  EXPECT_TRUE(contains(problems, "libfixture_not_a_plugin.so is not a Trainyard plugin"))
      << problems;
  EXPECT_EQ(registry.classes().size(), 2u);  // the good plugin is still usable
  EXPECT_THROW(registry.find(ClassKind::kModel, "OrphanModel"), NotFound);
  EXPECT_NO_THROW(registry.create<BaseModel>(ClassKind::kModel, "FixtureModel"));
}

// A directory of its own for copies of fixture plugins, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag)
      : path_(fs::temp_directory_path() / ("trainyard_" + tag + "_" + std::to_string(getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

PluginRegistry in_dirs(std::vector<fs::path> dirs) {
  PluginRegistry::Settings settings;
  settings.plugin_path = std::move(dirs);
  settings.use_environment = false;
  settings.use_default_dirs = false;
  return PluginRegistry(settings);
}

std::vector<std::string> class_names(const PluginRegistry& registry) {
  std::vector<std::string> names;
  for (const ClassInfo& info : registry.classes()) names.push_back(info.class_name);
  std::sort(names.begin(), names.end());
  return names;
}

// Listing reads the dynamic symbol table, which the loader needs and strip never removes.
TEST(RegistryTest, StrippedPluginsStillListEveryClassWithoutRunningCode) {
  const std::string strip = TRAINYARD_STRIP;
  if (strip.empty()) GTEST_SKIP() << "no strip program was found when the build was configured";
  fs::path marker = fs::temp_directory_path() / ("trainyard_marker_" + std::to_string(getpid()));
  fs::remove(marker);
  ::setenv("TRAINYARD_FIXTURE_MARKER", marker.c_str(), 1);
  for (const char* mode : {"--strip-unneeded", "--strip-all"}) {
    ScratchDir dir("stripped");
    for (const char* name : {"good", "static_init"}) {
      fs::path copy = dir.path() / ("libfixture_" + std::string(name) + ".so");
      fs::copy_file(fixture(name) / copy.filename(), copy);
      std::string command = "'" + strip + "' " + mode + " '" + copy.string() + "'";
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    }
    PluginRegistry registry = in_dirs({dir.path()});
    EXPECT_EQ(all_problems(registry), "") << mode;
    EXPECT_EQ(class_names(registry),
              (std::vector<std::string>{"FixtureLoss", "FixtureModel", "MarkerLoss"}))
        << mode;
    EXPECT_EQ(registry.find(ClassKind::kModel, "FixtureModel").plugin_version, "1.2.3") << mode;
    EXPECT_FALSE(fs::exists(marker)) << mode << ": listing ran the plugin's static initialisers";
    EXPECT_EQ(registry.loaded_library_count(), 0u) << mode;
    EXPECT_NO_THROW(registry.create<BaseModel>(ClassKind::kModel, "FixtureModel")) << mode;
  }
  ::unsetenv("TRAINYARD_FIXTURE_MARKER");
}

TEST(RegistryTest, TruncatedPluginIsReportedByNameAndSkipped) {
  const fs::path original = fixture("good") / "libfixture_good.so";
  const auto size = static_cast<std::size_t>(fs::file_size(original));
  std::string bytes(size, '\0');
  std::ifstream(original, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(size));
  for (std::size_t length : {size - 1, size / 2, std::size_t{64}, std::size_t{20}}) {
    ScratchDir dir("truncated");
    fs::path copy = dir.path() / "libfixture_good.so";
    std::ofstream(copy, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(length));
    PluginRegistry registry = in_dirs({dir.path(), fixture("throwing")});
    std::string problems = all_problems(registry);
    EXPECT_TRUE(contains(problems, copy.string() + " is a truncated or malformed ELF file: "))
        << length << ": " << problems;
    EXPECT_EQ(class_names(registry), std::vector<std::string>{"ThrowingModel"}) << length;
  }
}

TEST(RegistryTest, GarbageFilesAreReportedByNameAndSkipped) {
  ScratchDir dir("garbage");
  std::mt19937 rng(42);
  std::string garbage(4096, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  // Random bytes behind an ELF identification: a malformed ELF file.
  std::ofstream(dir.path() / "libelf_garbage.so", std::ios::binary) << std::string(
                                                                           "\x7f"
                                                                           "ELF\x02\x01\x01",
                                                                           7)
                                                                    << garbage;
  // Random bytes without one, and a linker script: not ELF at all.
  std::ofstream(dir.path() / "librandom.so", std::ios::binary) << "\x01" << garbage;
  std::ofstream(dir.path() / "libscript.so") << "/* GNU ld script */\nINPUT(-lfoo)\n";
  PluginRegistry registry = in_dirs({dir.path()});
  std::string problems = all_problems(registry);
  EXPECT_TRUE(contains(problems, (dir.path() / "libelf_garbage.so").string() +
                                     " is a truncated or malformed ELF file: "))
      << problems;
  for (const char* name : {"librandom.so", "libscript.so"}) {
    EXPECT_TRUE(contains(problems, (dir.path() / name).string() +
                                       " is not a Trainyard plugin: it is not an ELF shared "
                                       "library"))
        << problems;
  }
  EXPECT_EQ(registry.problems().size(), 3u) << problems;
  EXPECT_TRUE(registry.classes().empty());
}

TEST(RegistryTest, LibraryBuiltAgainstAnotherAbiIsRefusedWithoutLoading) {
  PluginRegistry registry = only({"other_sdk"});
  std::string problems = all_problems(registry);
  EXPECT_TRUE(contains(problems,
                       "libfixture_other_sdk.so was built against Trainyard SDK ABI 999, "
                       "but this host uses ABI " +
                           std::to_string(kSdkAbiVersion)))
      << problems;
  EXPECT_TRUE(registry.classes().empty());
  std::string m = error_of([&] { registry.find(ClassKind::kModel, "OtherSdkModel"); });
  EXPECT_TRUE(contains(m, "libfixture_other_sdk.so was built against Trainyard SDK ABI 999")) << m;
  EXPECT_EQ(registry.loaded_library_count(), 0u);
}

struct BadDescriptorCase {
  const char* dir;
  const char* class_name;
  const char* message;
};

class BadDescriptorTest : public ::testing::TestWithParam<BadDescriptorCase> {};

TEST_P(BadDescriptorTest, DescriptorIsCheckedBeforeAnyFactoryRuns) {
  const BadDescriptorCase& c = GetParam();
  PluginRegistry registry = only({c.dir});
  ASSERT_EQ(registry.classes().size(), 1u) << all_problems(registry);
  std::string m = error_of([&] { registry.create<BaseModel>(ClassKind::kModel, c.class_name); });
  EXPECT_TRUE(contains(m, std::string("libfixture_") + c.dir + ".so")) << m;
  EXPECT_TRUE(contains(m, c.message)) << m;
  EXPECT_THROW(registry.create<BaseModel>(ClassKind::kModel, c.class_name), PluginError);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, BadDescriptorTest,
    ::testing::Values(BadDescriptorCase{"bad_abi_field", "BadAbiFieldModel",
                                        "was built against Trainyard SDK ABI 999"},
                      BadDescriptorCase{"bad_struct_size", "BadStructSizeModel",
                                        "has a plugin descriptor of 8 bytes"},
                      BadDescriptorCase{"bad_cxx11_abi", "BadCxx11AbiModel",
                                        "_GLIBCXX_USE_CXX11_ABI="}),
    [](const auto& info) { return std::string(info.param.dir); });

TEST(RegistryTest, TwoLibrariesClaimingOneClassNameBothFiles) {
  PluginRegistry registry = only({"duplicate_a", "duplicate_b"});
  std::string problems = all_problems(registry);
  EXPECT_TRUE(contains(problems,
                       "class 'DuplicateModel' is claimed by more than one plugin "
                       "library"))
      << problems;
  std::string m = error_of([&] { registry.find(ClassKind::kModel, "DuplicateModel"); });
  EXPECT_TRUE(contains(m, "duplicate_a/libfixture_duplicate_a.so")) << m;
  EXPECT_TRUE(contains(m, "duplicate_b/libfixture_duplicate_b.so")) << m;
  EXPECT_THROW(registry.find(ClassKind::kModel, "DuplicateModel"), PluginError);
}

TEST(RegistryTest, ThrowingFactoryBecomesPluginErrorAndRegistryKeepsWorking) {
  PluginRegistry registry = only({"throwing", "good"});
  std::string m = error_of([&] { registry.create<BaseModel>(ClassKind::kModel, "ThrowingModel"); });
  EXPECT_TRUE(contains(m, "plugin 'fixture_throwing' 1.0.0")) << m;
  EXPECT_TRUE(contains(m, "libfixture_throwing.so")) << m;
  EXPECT_TRUE(contains(m,
                       "creating model 'ThrowingModel' failed: ThrowingModel refuses to be "
                       "constructed"))
      << m;
  EXPECT_THROW(registry.create<BaseModel>(ClassKind::kModel, "ThrowingModel"), PluginError);
  EXPECT_NO_THROW(registry.create<BaseModel>(ClassKind::kModel, "FixtureModel"));
}

TEST(RegistryTest, GuardConvertsForeignExceptionsAndPassesErrorsThrough) {
  PluginRegistry registry = only({"good"});
  auto model = registry.create<BaseModel>(ClassKind::kModel, "FixtureModel");
  Batch batch;  // no "features": std::map::at throws std::out_of_range inside the plugin
  UnusedContext ctx;
  std::string m = error_of(
      [&] { guard_plugin_call(*model, [&] { model->forward(ctx, batch, Mode::kTrain); }); });
  EXPECT_TRUE(contains(m, "plugin 'fixture_good' 1.2.3 (")) << m;
  EXPECT_TRUE(contains(m, "libfixture_good.so), model 'FixtureModel' threw std::out_of_range: "))
      << m;
  EXPECT_THROW(guard_plugin_call(*model, [] { throw InvalidArgument("mine"); }), InvalidArgument);
}

TEST(RegistryTest, GuardPrefixesOnceAndKeepsTheSdkErrorType) {
  PluginRegistry registry = only({"good"});
  auto model = registry.create<BaseModel>(ClassKind::kModel, "FixtureModel");
  auto loss = registry.create<Loss>(ClassKind::kLoss, "FixtureLoss");
  // Nested guards (a model calling into a loss) prefix the innermost plugin only, once.
  std::string m = error_of([&] {
    guard_plugin_call(*model, "forward", [&] {
      guard_plugin_call(*loss, "calculate_loss", [] { throw DataLoss("bad"); });
    });
  });
  EXPECT_EQ(m, "plugin 'fixture_good' 1.2.3 (" + loss->plugin_origin().library_path +
                   "), loss 'FixtureLoss', calculate_loss: bad");
  EXPECT_THROW(guard_plugin_call(*model, "forward", [] { throw DataLoss("x"); }), DataLoss);
  // A value that is no exception class at all: a PluginError naming its type, not terminate().
  m = error_of([&] { guard_plugin_call(*model, "forward", [] { throw 42; }); });
  EXPECT_TRUE(contains(m,
                       "model 'FixtureModel', forward threw an exception of type int, "
                       "which is not a std::exception"))
      << m;
  EXPECT_THROW(guard_plugin_call(*model, "forward", [] { throw 42; }), PluginError);
  // The guard returns what the call returns.
  EXPECT_EQ(guard_plugin_call(*model, "forward", [] { return 7; }), 7);
}

TEST(RegistryTest, ReadingAnUndeclaredOptionPointsAtKOptions) {
  PluginRegistry registry = only({"faulty"});
  std::string m =
      error_of([&] { registry.create<BaseModel>(ClassKind::kModel, "UndeclaredOptionModel"); });
  EXPECT_TRUE(contains(m,
                       "creating model 'UndeclaredOptionModel' failed: no option "
                       "'hidden_size': the class reads it but does not declare it (it "
                       "declares none); declare each option a class reads in its `static "
                       "constexpr trainyard::OptionSpec kOptions[]`"))
      << m;
}

TEST(RegistryTest, PluginWithAnotherLayoutIsRefusedNamingTheFile) {
  PluginRegistry registry = only({"bad_layout"});
  std::string m =
      error_of([&] { registry.create<BaseModel>(ClassKind::kModel, "BadLayoutModel"); });
  EXPECT_TRUE(contains(m,
                       "libfixture_bad_layout.so was built against SDK headers whose shared "
                       "types"))
      << m;
  EXPECT_TRUE(contains(m, "rebuild the plugin against this SDK")) << m;
}

TEST(RegistryTest, PluginOfAnotherCompilerFamilyIsAProblemBeforeLoading) {
  PluginRegistry registry = only({"other_compiler"});
  ASSERT_EQ(registry.problems().size(), 1u);
  EXPECT_TRUE(contains(registry.problems()[0].message,
                       "C++ plugin classes need the same compiler "
                       "family"))
      << registry.problems()[0].message;
  EXPECT_EQ(registry.loaded_library_count(), 0u);
}

TEST(RegistryTest, LayoutStampHashesTheSubsetItIsGiven) {
  // What this file sees (model.h, loss.h, ...); the host checks a plugin's stamp by hashing
  // the same subset of its own types, so a subset must reproduce the hash and a smaller one
  // must not.
  const LayoutStamp seen = sdk_layout_stamp();
  EXPECT_NE(seen.types & (uint64_t{1} << 14), 0u);  // ModelOutput
  EXPECT_EQ(sdk_layout_stamp(seen.types).hash, seen.hash);
  EXPECT_NE(sdk_layout_stamp(seen.types & ~(uint64_t{1} << 14)).hash, seen.hash);
}

TEST(RegistryTest, TypedCreateRefusesTheWrongInterface) {
  PluginRegistry registry = only({"good"});
  const ClassInfo& info = registry.find(ClassKind::kLoss, "FixtureLoss");
  EXPECT_EQ(std::dynamic_pointer_cast<BaseModel>(registry.create(info, {})), nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<Loss>(registry.create(info, {})), nullptr);
}

TEST(RegistryTest, EarlierDirectoryShadowsSameLibraryNameLater) {
  fs::path copy_dir = fs::temp_directory_path() / ("trainyard_shadow_" + std::to_string(getpid()));
  fs::create_directories(copy_dir);
  fs::copy_file(fixture("good") / "libfixture_good.so", copy_dir / "libfixture_good.so",
                fs::copy_options::overwrite_existing);
  PluginRegistry::Settings settings;
  settings.plugin_path = {copy_dir, fixture("good")};
  settings.use_environment = false;
  settings.use_default_dirs = false;
  PluginRegistry registry(settings);
  EXPECT_EQ(all_problems(registry), "");
  EXPECT_EQ(registry.find(ClassKind::kModel, "FixtureModel").library.parent_path(),
            fs::weakly_canonical(copy_dir));
  fs::remove_all(copy_dir);
}

TEST(RegistryTest, SearchOrderIsFlagThenEnvironmentThenBuildTree) {
  ::setenv("TRAINYARD_PLUGIN_PATH",
           (fixture("good").string() + ":" + fixture("throwing").string()).c_str(), 1);
  PluginRegistry::Settings settings;
  settings.plugin_path = {fixture("static_init")};
  std::vector<PluginSearchDir> dirs = PluginRegistry::search_dirs(settings);
  ::unsetenv("TRAINYARD_PLUGIN_PATH");
  ASSERT_GE(dirs.size(), 4u);
  EXPECT_EQ(dirs[0].dir, fixture("static_init"));
  EXPECT_EQ(dirs[0].origin, "--plugin_path");
  EXPECT_EQ(dirs[1].dir, fixture("good"));
  EXPECT_EQ(dirs[1].origin, "TRAINYARD_PLUGIN_PATH");
  EXPECT_EQ(dirs[2].dir, fixture("throwing"));
  EXPECT_EQ(dirs[3].origin, "build tree");
  EXPECT_EQ(dirs[3].dir, fs::weakly_canonical(TRAINYARD_PLUGIN_DIR));
}

TEST(RegistryTest, BuildTreePluginsAreFoundByDefault) {
  PluginRegistry::Settings settings;
  settings.use_environment = false;
  PluginRegistry registry(settings);
  EXPECT_EQ(registry.find(ClassKind::kBackend, "cpu").plugin_name, "cpu_backend");
  EXPECT_EQ(registry.find(ClassKind::kCollective, "LocalCollective").plugin_name, "collectives");
}

TEST(RegistryTest, MissingExplicitDirectoryIsReported) {
  PluginRegistry registry = only({"does_not_exist"});
  EXPECT_TRUE(
      contains(all_problems(registry), "does_not_exist (from --plugin_path) does not exist"))
      << all_problems(registry);
}

}  // namespace
}  // namespace trainyard
