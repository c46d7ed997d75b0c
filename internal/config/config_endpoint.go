package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// SDKPath is the path of vCenter's SOAP endpoint (govmomi's vim25.Path,
// which TestSDKPathIsGovmomis checks it equals): an endpoint without a
// path gets it. The configuration imports no govmomi package.
const SDKPath = "/sdk"

// The endpoint rules (docs/configuration.md, "endpoint"): a host name or
// address, optionally with a port, optionally written as an https URL whose
// path is empty, "/" or the SDK path "/sdk". vCenter is reached over HTTPS
// only: the password is sent at login, so plain http is refused, as are
// other schemes, user information (the credentials belong in user and
// password), queries and fragments.

// checkEndpoint returns what is wrong with a vCenter endpoint, "" when
// nothing is. The message never repeats the value: an endpoint written with
// user information may hold the password.
func checkEndpoint(v string) string {
	_, problem := parseEndpoint(v)
	return problem
}

// parseEndpoint is checkEndpoint returning the SDK URL of a good endpoint.
func parseEndpoint(v string) (*url.URL, string) {
	e := strings.TrimSpace(v)
	if e == "" {
		return nil, "required: the vCenter host name or address (e.g. vcenter.example.com)"
	}
	if strings.ContainsAny(e, " \t\r\n") {
		return nil, "contains white space (want a host name, host:port or https://host[:port][/sdk]; value not shown)"
	}
	if scheme, _, ok := strings.Cut(e, "://"); ok {
		switch strings.ToLower(scheme) {
		case "https":
		case "http":
			return nil, "http:// would send the vCenter password in clear: use https:// (or just the host name)"
		default:
			return nil, "the scheme is not https (vCenter is reached over https only; write the host name or https://host[:port][/sdk])"
		}
	} else {
		e = "https://" + e
	}
	u, err := url.Parse(e)
	if err != nil {
		return nil, "does not parse as a host name, host:port or https URL (value not shown)"
	}
	if u.User != nil || strings.Contains(u.Host, "@") {
		return nil, "is not a host name: it holds user information (user@ or user:password@): give the user in hatchery.vsphere.user and the password in hatchery.vsphere.password or " + EnvPassword + " (value not shown)"
	}
	if u.Hostname() == "" {
		return nil, "has no host (want e.g. vcenter.example.com)"
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Sprintf("port %q is out of range (allowed: 1-65535, or no port for 443)", p)
		}
	}
	switch u.Path {
	case "", "/":
		u.Path = SDKPath
	case SDKPath, SDKPath + "/":
		u.Path = SDKPath
	default:
		return nil, fmt.Sprintf("path %q is not the SDK path (allowed: none, \"/\" or %q)", u.EscapedPath(), SDKPath)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, "has a query or fragment (want https://host[:port][/sdk])"
	}
	return u, ""
}
