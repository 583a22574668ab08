package cli

import "github.com/spf13/cobra"

func newMCPCmd(e *env) *cobra.Command      { return &cobra.Command{Use: "mcp"} }
func newSelfTestCmd(e *env) *cobra.Command { return &cobra.Command{Use: "self-test"} }
