package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// acrelay version and acrelay --version: the module version and the VCS
// commit the binary was built from, as the Go toolchain recorded them.

func init() {
	rootCmd.Version = versionString(debug.ReadBuildInfo())
	// cobra's default template prints "acrelay version <Version>".
	rootCmd.SetVersionTemplate("acrelay {{.Version}}\n")
	rootCmd.AddCommand(&cobra.Command{
		Use:     "version",
		Short:   "Print the module version and VCS commit acrelay was built from",
		Example: "  acrelay version\n  acrelay --version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "acrelay %s\n", rootCmd.Version)
			return err
		},
	})
}

// versionString renders build information as "v1.2.3 (commit 0123456789ab,
// 2026-07-19T12:00:00Z, modified) go1.26.0". A binary built from a
// checkout with `go build` has the version "(devel)"; one built without
// VCS stamping (go test, -buildvcs=false) has no commit, and then says so.
func versionString(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "(unknown: no build information)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var vcs []string
	if rev := settings["vcs.revision"]; rev != "" {
		vcs = append(vcs, "commit "+rev[:min(len(rev), 12)])
	} else {
		vcs = append(vcs, "no VCS commit recorded")
	}
	if t := settings["vcs.time"]; t != "" {
		vcs = append(vcs, t)
	}
	if settings["vcs.modified"] == "true" {
		vcs = append(vcs, "modified")
	}
	out := v + " (" + strings.Join(vcs, ", ") + ")"
	if info.GoVersion != "" {
		out += " " + info.GoVersion
	}
	return out
}
