package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The configuration file (--config acrelay.yaml, or ACRELAY_CONFIG) holds
// the same settings as a command's flags, under the flags' own names:
//
//	addr: 0.0.0.0:8080
//	courier-lease: 30s
//	database-url-file: /run/secrets/database-url
//
// Its keys are derived from the command's FlagSet, so a flag added later
// is a key at once. A secret flag (one bound with bindSecretEnv) also
// takes KEY-file: the path of a file holding the secret. Precedence: flag,
// then ACRELAY_* (and ACRELAY_*_FILE for secrets), then the file, then the
// flag's default; koanf merges the three layers.

// configFlag names the flag that points at the configuration file.
const configFlag = "config"

// redacted replaces a secret in `acrelay config print`.
const redacted = "[redacted]"

// addConfigFlag gives cmd the --config flag (ACRELAY_CONFIG).
func addConfigFlag(cmd *cobra.Command) {
	cmd.Flags().String(configFlag, envOr("ACRELAY_CONFIG", ""), "YAML file of settings keyed by flag name; flags and ACRELAY_* override it (ACRELAY_CONFIG)")
}

// flagEnv is the environment variable of f: the one it was bound to, else
// ACRELAY_ and its name in upper snake case (as envOr's flags spell it).
func flagEnv(f *pflag.Flag) (env string, secret bool) {
	if e := f.Annotations[secretEnvAnnotation]; len(e) == 1 {
		return e[0], true
	}
	if e := f.Annotations[envAnnotation]; len(e) == 1 {
		return e[0], false
	}
	return "ACRELAY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")), false
}

// configurable reports whether f is a setting (not --help or --config).
func configurable(f *pflag.Flag) bool { return f.Name != "help" && f.Name != configFlag }

// loadConfig merges the file, the environment and the command line for
// every flag of fs. fromFile and fromEnv name the keys those two layers
// set.
func loadConfig(fs *pflag.FlagSet) (k *koanf.Koanf, fromFile, fromEnv map[string]bool, err error) {
	k = koanf.New(".")
	fromFile, fromEnv = map[string]bool{}, map[string]bool{}
	if f := fs.Lookup(configFlag); f != nil && f.Value.String() != "" {
		path := f.Value.String()
		if err := loadConfigFile(k, fs, path, fromFile); err != nil {
			return nil, nil, nil, err
		}
	}
	env := map[string]any{}
	var envErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if envErr != nil || !configurable(f) {
			return
		}
		name, secret := flagEnv(f)
		v := os.Getenv(name)
		if secret {
			v, envErr = secretFromEnv(name)
		}
		if v != "" {
			env[f.Name] = v
			fromEnv[f.Name] = true
		}
	})
	if envErr != nil {
		return nil, nil, nil, envErr
	}
	if err := k.Load(confmap.Provider(env, "."), nil); err != nil {
		return nil, nil, nil, fmt.Errorf("environment: %w", err)
	}
	// Flags given on the command line override; the others fill only the
	// keys no layer set (with their defaults).
	flags := posflag.ProviderWithFlag(fs, ".", k, func(f *pflag.Flag) (string, any) {
		if !configurable(f) {
			return "", nil
		}
		return f.Name, f.Value.String()
	})
	if err := k.Load(flags, nil); err != nil {
		return nil, nil, nil, fmt.Errorf("flags: %w", err)
	}
	return k, fromFile, fromEnv, nil
}

// loadConfigFile loads the YAML file at path into k. A key that is no flag
// of fs is an error naming it; KEY-file of a secret flag is read.
func loadConfigFile(k *koanf.Koanf, fs *pflag.FlagSet, path string, fromFile map[string]bool) error {
	fk := koanf.New(".")
	if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("--config %s: %w", path, err)
	}
	values := map[string]any{}
	for _, key := range fk.Keys() {
		f := fs.Lookup(key)
		if f != nil && configurable(f) {
			values[key] = fk.Get(key)
			continue
		}
		if name, ok := strings.CutSuffix(key, "-file"); ok {
			if sf := fs.Lookup(name); sf != nil {
				if _, secret := flagEnv(sf); secret {
					v, err := readSecretFile(fk.String(key))
					if err != nil {
						return fmt.Errorf("--config %s: key %q: %w", path, key, err)
					}
					values[name] = v
					continue
				}
			}
		}
		return fmt.Errorf("--config %s: unknown key %q (the keys are the flag names of `acrelay serve --help`)", path, key)
	}
	for key := range values {
		fromFile[key] = true
	}
	return k.Load(confmap.Provider(values, "."), nil)
}

// readSecretFile reads a secret from path, as secretFromEnv reads NAME_FILE.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("cannot read the file it names: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", errors.New("the file it names is empty")
	}
	return s, nil
}

// applyConfig sets every flag of cmd not given on the command line from
// the environment or the configuration file (loadConfig). It replaces
// applyEnv for commands with --config. A value the flag cannot take is an
// error naming the key and where it came from; a secret is never quoted.
func applyConfig(cmd *cobra.Command) error {
	fs := cmd.Flags()
	k, fromFile, fromEnv, err := loadConfig(fs)
	if err != nil {
		return err
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || !configurable(f) || (!fromFile[f.Name] && !fromEnv[f.Name]) {
			return
		}
		raw := k.Get(f.Name)
		v := configString(raw)
		if setConfigValue(f, raw, v) {
			return
		}
		env, secret := flagEnv(f)
		quoted := fmt.Sprintf(" %q", v)
		if secret {
			quoted = ""
		}
		if fromEnv[f.Name] {
			err = fmt.Errorf("%s%s: want %s", env, quoted, wantValue(f))
		} else {
			err = fmt.Errorf("--config %s: key %q%s: want %s", fs.Lookup(configFlag).Value, f.Name, quoted, wantValue(f))
		}
	})
	return err
}

// configString is a file value as a flag's parser takes it: YAML lists as
// comma-separated values.
func configString(v any) string {
	if l, ok := v.([]any); ok {
		s := make([]string, len(l))
		for i, x := range l {
			s[i] = fmt.Sprint(x)
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprint(v)
}

// setConfigValue sets f from a layered value raw (v is its string form).
// A list flag (pflag.SliceValue: stringSlice, stringArray, …) takes a
// YAML list, as config print writes it, as the list itself: [] (or null)
// is none, and an item may hold a comma. A string, and every value of
// another flag, is parsed as on the command line.
func setConfigValue(f *pflag.Flag, raw any, v string) bool {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		if _, isList := raw.([]any); isList || raw == nil {
			l, ok := configList(raw)
			return ok && sv.Replace(l) == nil
		}
	}
	return f.Value.Set(v) == nil
}

// configList is a YAML list of scalars as strings, null as none. ok is
// false when an item is a list, a map or null.
func configList(v any) (l []string, ok bool) {
	items, _ := v.([]any)
	l = make([]string, len(items))
	for i, x := range items {
		switch x.(type) {
		case []any, map[string]any, nil:
			return nil, false
		}
		l[i] = fmt.Sprint(x)
	}
	return l, true
}

// newConfigCmd is `acrelay config print`: serve's effective settings, as a
// configuration file, secrets redacted.
func newConfigCmd() *cobra.Command {
	root := &cobra.Command{Use: "config", Short: "Show the configuration serve would run with"}
	serve := newServeCmd()
	print := &cobra.Command{
		Use:   "print",
		Short: "Print serve's effective configuration (flags > ACRELAY_* > --config file > defaults), secrets as [redacted]",
		Example: `  acrelay config print --config /etc/acrelay/acrelay.yaml
  ACRELAY_ADDR=0.0.0.0:8080 acrelay config print --log-level debug`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printConfig(cmd.OutOrStdout(), cmd.Flags())
		},
	}
	print.Flags().AddFlagSet(serve.Flags())
	root.AddCommand(print)
	return root
}

func init() { rootCmd.AddCommand(newConfigCmd()) }

// printConfig writes fs's values (already layered by applyConfig) as YAML,
// one key per line in flag order.
func printConfig(w io.Writer, fs *pflag.FlagSet) error {
	if f := fs.Lookup(configFlag); f != nil && f.Value.String() != "" {
		fmt.Fprintf(w, "# effective configuration; file: %s\n", f.Value)
	} else {
		fmt.Fprintln(w, "# effective configuration; no file")
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || !configurable(f) {
			return
		}
		_, secret := flagEnv(f)
		if sv, ok := f.Value.(pflag.SliceValue); ok && !secret {
			_, err = fmt.Fprintf(w, "%s: %s\n", f.Name, yamlList(sv.GetSlice()))
			return
		}
		v := f.Value.String()
		if secret && v != "" {
			v = redactSecret(v)
		}
		_, err = fmt.Fprintf(w, "%s: %s\n", f.Name, yamlScalar(f, v))
	})
	return err
}

// redactSecret hides a secret; of a URL with a password it hides only the
// password, so the operator still sees the host and database.
func redactSecret(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" || strings.Contains(strings.ToLower(u.RawQuery), "password") {
		return redacted
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
		return strings.Replace(u.String(), "REDACTED", redacted, 1)
	}
	return v
}

// yamlScalar spells v for YAML: numbers and booleans bare, strings quoted.
func yamlScalar(f *pflag.Flag, v string) string {
	switch f.Value.Type() {
	case "int", "int64", "uint", "float64", "bool":
		return v
	}
	return strconv.Quote(v)
}

// yamlList spells a list flag's values as a YAML flow sequence of quoted
// strings, [] for none, which applyConfig reads back as the same list
// (String() would print "[a,b]", which reads back as one value "[a,b]").
func yamlList(l []string) string {
	q := make([]string, len(l))
	for i, v := range l {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
