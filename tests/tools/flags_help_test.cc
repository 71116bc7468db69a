// The names --help and --helpfull give groups of absl flags
// (tools/common/flags_help.h): a binary's titles, wherever it was built;
// never a build directory or a source file. The binaries' own --help is
// checked in ps_server_cli_test.cc and ps_scheduler_cli_test.cc.
#include "tools/common/flags_help.h"

#include <string>
#include <vector>

#include "tests/testing/test_util.h"

namespace psdb::tools {
namespace {

const std::vector<FlagsHelpGroup> kGroups = {
    {"tools/server/server_flags.cc", "ps-server"},
    {"tools/common/tls_flags.cc", "ps-server TLS"},
};

TEST(FlagsHelpNameTest, AGroupsFileIsItsTitleWhereverTheTreeWasBuilt) {
  for (const char* path :
       {"/tmp/build-7/tools/common/tls_flags.cc",
        "../../tools/common/tls_flags.cc", "tools/common/tls_flags.cc",
        "/home/ci/psdb/tools/common/tls_flags.cc"}) {
    EXPECT_EQ(FlagsHelpName(path, kGroups), "ps-server TLS") << path;
  }
  EXPECT_EQ(FlagsHelpName("/src/psdb/tools/server/server_flags.cc", kGroups),
            "ps-server");
}

TEST(FlagsHelpNameTest, AFileOnlyEndingLikeAGroupsFileIsNotIt) {
  // "mytools/..." ends with "tools/..." but not at a directory boundary.
  EXPECT_EQ(FlagsHelpName("/x/mytools/common/tls_flags.cc", kGroups),
            "tls_flags");
}

TEST(FlagsHelpNameTest, AbseilsOwnFlagsKeepTheLibrarysLayoutOnly) {
  EXPECT_EQ(FlagsHelpName("./absl/flags/parse.cc", kGroups),
            "absl/flags/parse");
  EXPECT_EQ(FlagsHelpName("/build/abseil-20220623/absl/flags/internal/usage.cc",
                          kGroups),
            "absl/flags/internal/usage");
}

TEST(FlagsHelpNameTest, AnyOtherFileIsItsBaseNameWithoutExtension) {
  EXPECT_EQ(FlagsHelpName("/tmp/x.y/rpc/control/node_config_flags.cc", kGroups),
            "node_config_flags");
  EXPECT_EQ(FlagsHelpName("main", kGroups), "main");
  EXPECT_EQ(FlagsHelpName("", kGroups), "");
}

TEST(FlagsHelpNameTest, ATitleNamesItself) {
  // absl may hand the --help filter the name normalize_filename made.
  for (const FlagsHelpGroup& group : kGroups) {
    EXPECT_EQ(FlagsHelpName(group.title, kGroups), group.title);
  }
}

}  // namespace
}  // namespace psdb::tools
