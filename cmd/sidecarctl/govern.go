package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/authentication/user"
)

// requesterFlags say who check asks the SidecarSet policies as (input.userInfo), as kubectl's
// --as and --as-group say whom to impersonate.
type requesterFlags struct {
	as     string
	groups []string
}

func (f *requesterFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.as, "as", "", "the user who creates or updates the SidecarSets, for the SidecarSet policies (input.userInfo.username), as kubectl --as")
	fs.StringArrayVar(&f.groups, "as-group", nil, "a group of the --as user (input.userInfo.groups), as kubectl --as-group; repeatable")
}

// userInfo is the requester as the API server makes an impersonated one: the groups given, and
// system:authenticated (system:unauthenticated for system:anonymous) unless they say either. No
// --as: no user, as the policies cannot tell offline who will apply the files.
func (f requesterFlags) userInfo() (authenticationv1.UserInfo, error) {
	if f.as == "" {
		if len(f.groups) > 0 {
			return authenticationv1.UserInfo{}, usageError{fmt.Errorf("--as-group %s without --as: give the user too, as kubectl requires", strings.Join(f.groups, ","))}
		}
		return authenticationv1.UserInfo{}, nil
	}
	groups := slices.Clone(f.groups)
	switch {
	case f.as == user.Anonymous && !slices.Contains(groups, user.AllUnauthenticated):
		groups = append(groups, user.AllUnauthenticated)
	case f.as != user.Anonymous && !slices.Contains(groups, user.AllAuthenticated) && !slices.Contains(groups, user.AllUnauthenticated):
		groups = append(groups, user.AllAuthenticated)
	}
	return authenticationv1.UserInfo{Username: f.as, Groups: groups}, nil
}
