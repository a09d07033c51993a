package cli

import (
	"context"
	"flag"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command table stays the one description of tenure's commands, and
// Main the one parser that runs them (so exit codes and messages are its
// own). commandTree describes the same table to cobra, which only answers
// the questions a shell asks while the user types (completion scripts and
// their __complete requests) and writes the pages of `tenure docs`. Each
// command's own flag.FlagSet is imported into cobra's, with the same
// positional rule (interspersed or not, "--" ends the flags), so both see
// the same flags in the same places.

// shells are the shells `tenure completion` writes a script for.
var shells = []string{"bash", "zsh", "fish"}

func completionCommand() *command {
	return &command{
		summary:  "print the shell completion script of bash, zsh or fish",
		synopsis: "completion bash|zsh|fish",
		about: `Completion prints a script that completes tenure's commands, their flags
and the fixed words some of them take (help's command names, completion's
shells, fence's reset) as you type, in bash, zsh or fish. Lease names are
not completed: they live in the store.

To load it into the current shell:
  bash:  source <(tenure completion bash)
  zsh:   source <(tenure completion zsh)
  fish:  tenure completion fish | source
To load it in every new shell, write it where the shell looks:
  bash:  tenure completion bash > ~/.local/share/bash-completion/completions/tenure
  zsh:   tenure completion zsh > "${fpath[1]}/_tenure"
  fish:  tenure completion fish > ~/.config/fish/completions/tenure.fish
The bash script needs the bash-completion package (most distributions
install it with bash; on macOS: brew install bash-completion@2). The
scripts ask tenure itself what to offer (tenure __complete WORDS…), so they
follow the installed tenure's commands and flags.`,
		words: func() []string { return shells },
		setup: func(fs *flag.FlagSet) action {
			return func(_ context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usagef("completion", "takes one shell, %s; got %d arguments", strings.Join(shells, ", "), len(args))
				}
				root := commandTree()
				switch args[0] {
				case "bash":
					return root.GenBashCompletionV2(e.stdout, true)
				case "zsh":
					return root.GenZshCompletion(e.stdout)
				case "fish":
					return root.GenFishCompletion(e.stdout, true)
				}
				return usagef("completion", "unknown shell %q; the shells are %s", args[0], strings.Join(shells, ", "))
			}
		},
	}
}

// completeRequestCommand is the hidden command a completion script runs
// while the user types: request is cobra's __complete (completions with
// descriptions) or __completeNoDesc. Its arguments are the words typed so
// far after "tenure", the last one the word being completed.
func completeRequestCommand(request string) *command {
	return &command{
		summary:  "answer a shell completion script's request (internal)",
		synopsis: request + " [WORD...]",
		about: `The completion scripts of tenure completion run this command with the
words typed so far; it prints the candidates for the last word, one a
line, and a line ":DIRECTIVE" that tells the script what to do with them.`,
		raw:    true,
		hidden: true,
		setup: func(fs *flag.FlagSet) action {
			return func(ctx context.Context, e *env, args []string) error {
				root := commandTree()
				root.SetArgs(append([]string{request}, args...))
				root.SetOut(e.stdout)
				root.SetErr(e.stderr)
				return root.ExecuteContext(ctx)
			}
		},
	}
}

// commandTree describes the command table to cobra: every command that is
// not hidden, with its synopsis, summary, text and flags. The tree runs
// nothing: Main runs the commands.
func commandTree() *cobra.Command {
	root := &cobra.Command{
		Use:                   "tenure [-v] [--log-format FORMAT] COMMAND [ARG...]",
		Short:                 "run a job under a lease with a fencing token",
		Long:                  pageText(overview()),
		DisableFlagsInUseLine: true,
		DisableAutoGenTag:     true,
		SilenceErrors:         true,
		SilenceUsage:          true,
		CompletionOptions:     cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	// The global flags are the root's persistent flags: cobra accepts them
	// before a command's name and among its flags, as Main does.
	globals := flag.NewFlagSet("tenure", flag.ContinueOnError)
	new(globalFlags).define(globals)
	importFlags(root, root.PersistentFlags(), globals)
	table := commandTable()
	for _, name := range orderedNames() {
		cmd := table[name]
		c := &cobra.Command{
			Use:                   cmd.synopsis,
			Short:                 cmd.summary,
			Long:                  pageText(cmd.about),
			DisableFlagsInUseLine: true,
			DisableFlagParsing:    cmd.raw,
			// Cobra offers and documents only runnable commands; Main
			// runs them, so this never does.
			Run: func(*cobra.Command, []string) {},
		}
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		cmd.setup(fs)
		importFlags(c, c.Flags(), fs)
		c.Flags().SetInterspersed(cmd.interspersed)
		if cmd.words != nil {
			c.ValidArgsFunction = completeWords(cmd.words)
		}
		root.AddCommand(c)
		if name == "help" {
			root.SetHelpCommand(c)
		}
	}
	return root
}

// importFlags adds the flags of fs to c's flag set to, as help shows them:
// flags internal to tenure hidden, the argument's name (`URL`) as the
// flag's type, a value's default only when help shows one, and the values
// of a flag with fixed words completed.
func importFlags(c *cobra.Command, to *pflag.FlagSet, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		pf := pflag.PFlagFromGoFlag(f)
		meta, usage := flag.UnquoteUsage(f)
		if meta == "" {
			meta = "bool"
		} else {
			pf.DefValue = shownDefault(f)
		}
		pf.Value = argValue{Value: pf.Value, name: meta}
		pf.Usage = usage
		pf.Hidden = strings.HasPrefix(f.Usage, hiddenFlag)
		to.AddFlag(pf)
		if w, ok := f.Value.(wordsValue); ok {
			// Registering fails only for a flag registered twice, and
			// every tree has flags of its own.
			_ = c.RegisterFlagCompletionFunc(f.Name, completeWords(w.Words))
		}
	})
}

// argValue is a flag's value whose type, for cobra, is the name of its
// argument in help.
type argValue struct {
	pflag.Value
	name string
}

func (v argValue) Type() string { return v.name }

// wordsValue is a flag value that is one of a few fixed words, which
// completion offers.
type wordsValue interface {
	flag.Value
	Words() []string
}

// completeWords completes the first positional argument (or a flag's
// value) from the words of words, and nothing after it.
func completeWords(words func() []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		if len(args) == 0 {
			for _, w := range words() {
				if strings.HasPrefix(w, toComplete) {
					out = append(out, w)
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// pageText turns the plain text of help into markdown for the pages of
// tenure docs: unindented lines stay prose, and each run of indented lines
// (lists, examples, tables) becomes a preformatted block, so it keeps its
// line breaks and columns.
func pageText(text string) string {
	var b strings.Builder
	const blank, prose, pre = 0, 1, 2
	last := blank
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.TrimSpace(line) == "" {
			b.WriteString("\n")
			last = blank
			continue
		}
		kind := prose
		if strings.HasPrefix(line, " ") {
			kind = pre
			line = "    " + line
		}
		if last != blank && last != kind {
			b.WriteString("\n")
		}
		b.WriteString(line + "\n")
		last = kind
	}
	return b.String()
}
