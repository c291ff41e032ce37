package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/internal/attributed"
)

// selfFlags are the settings of the commands that read on the agent's
// behalf (guard, inbox): the relay, and who and where the agent is, its
// identity and repository, from flags, ACRELAY_* or the agent profile.
type selfFlags struct {
	rf           relayFlags
	identityID   string
	repositoryID string
}

func (f *selfFlags) add(cmd *cobra.Command) {
	f.rf.add(cmd, false)
	fs := cmd.Flags()
	fs.StringVar(&f.identityID, "identity-id", envOr("ACRELAY_IDENTITY_ID", ""), "the agent's own identity, whose claims are not reported (env ACRELAY_IDENTITY_ID; default: the profile's)")
	fs.StringVar(&f.repositoryID, "repository-id", envOr("ACRELAY_REPOSITORY_ID", ""), "repository id (env ACRELAY_REPOSITORY_ID; default: the profile's)")
}

// resolve fills identity and repository from the profile and builds the
// client. Errors: no URL, token, identity or repository.
func (f *selfFlags) resolve(stderr io.Writer) (*client.Client, *agentProfile, error) {
	p, err := f.rf.prof.get()
	if err != nil {
		return nil, nil, err
	}
	if p != nil {
		if f.identityID == "" {
			f.identityID = p.IdentityID
		}
		if f.repositoryID == "" {
			f.repositoryID = p.RepositoryID
		}
	}
	if f.repositoryID == "" {
		return nil, p, errors.New("no repository: set --repository-id, ACRELAY_REPOSITORY_ID or the profile's repository_id (acrelay agent init --repository-id)")
	}
	if f.identityID == "" {
		return nil, p, errors.New("no identity: set --identity-id, ACRELAY_IDENTITY_ID or an agent profile (acrelay agent init)")
	}
	c, err := f.rf.client(stderr)
	return c, p, err
}

// authorOf names identity id for attributed quotations, with its display
// name when names has it.
func authorOf(names map[string]client.Identity, id string) attributed.Author {
	return attributed.Author{IdentityID: id, DisplayName: names[id].DisplayName}
}
