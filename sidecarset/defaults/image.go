package defaults

import (
	"regexp"
	"strings"
)

// imageTag returns the tag Kubernetes' parsers.ParseImageName reports for image: "latest" when the
// reference has neither tag nor digest, "" when it has only a digest or does not parse. Kubernetes
// parses with github.com/distribution/reference (ParseNormalizedNamed); this is a transcription of
// the parts of that grammar that decide the outcome, because a registry port (host:5000/img) or a
// digest (img@sha256:…) must not be mistaken for a tag.
func imageTag(image string) string {
	tag, digest, ok := parseNormalizedNamed(image)
	if !ok {
		return ""
	}
	if tag == "" && digest == "" {
		return "latest"
	}
	return tag
}

const (
	alphanumeric        = `[a-z0-9]+`
	separator           = `(?:[._]|__|[-]+)`
	pathComponent       = alphanumeric + `(?:` + separator + alphanumeric + `)*`
	domainNameComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	ipv6address         = `\[(?:[a-fA-F0-9:]+)\]`
	domainName          = domainNameComponent + `(?:\.` + domainNameComponent + `)*`
	domainAndPort       = `(?:` + domainName + `|` + ipv6address + `)(?::[0-9]+)?`
	namePat             = `(?:` + domainAndPort + `/)?` + pathComponent + `(?:/` + pathComponent + `)*`
	tagPat              = `[\w][\w.-]{0,127}`
	digestPat           = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}`

	// nameTotalLengthMax is distribution/reference's limit on the full (normalised) name.
	nameTotalLengthMax = 255
	defaultDomain      = "docker.io"
	legacyDomain       = "index.docker.io"
	officialRepoPrefix = "library/"
)

var (
	referenceRegexp  = regexp.MustCompile(`^(` + namePat + `)(?::(` + tagPat + `))?(?:@(` + digestPat + `))?$`)
	identifierRegexp = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// The digest algorithms Kubernetes links in (crypto/sha256, crypto/sha512) and the exact hex
	// length and alphabet go-digest requires for each.
	digestHexLen = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}
	lowerHex     = regexp.MustCompile(`^[a-f0-9]*$`)
)

// parseNormalizedNamed mirrors reference.ParseNormalizedNamed far enough to return the tag and the
// digest, and whether the reference is valid.
func parseNormalizedNamed(s string) (tag, digest string, ok bool) {
	if identifierRegexp.MatchString(s) {
		return "", "", false
	}
	domain, remainder := splitDockerDomain(s)
	remoteName := remainder
	if i := strings.IndexRune(remainder, ':'); i > -1 {
		remoteName = remainder[:i]
	}
	if strings.ToLower(remoteName) != remoteName {
		return "", "", false
	}
	m := referenceRegexp.FindStringSubmatch(domain + "/" + remainder)
	if m == nil || len(m[1]) > nameTotalLengthMax {
		return "", "", false
	}
	if m[3] != "" && !validDigest(m[3]) {
		return "", "", false
	}
	return m[2], m[3], true
}

func splitDockerDomain(name string) (domain, remainder string) {
	i := strings.IndexRune(name, '/')
	if i == -1 || (!strings.ContainsAny(name[:i], ".:") && name[:i] != "localhost" && strings.ToLower(name[:i]) == name[:i]) {
		domain, remainder = defaultDomain, name
	} else {
		domain, remainder = name[:i], name[i+1:]
	}
	if domain == legacyDomain {
		domain = defaultDomain
	}
	if domain == defaultDomain && !strings.ContainsRune(remainder, '/') {
		remainder = officialRepoPrefix + remainder
	}
	return domain, remainder
}

// validDigest is go-digest's Digest.Validate for the algorithms Kubernetes registers: any other
// algorithm is "unsupported", which makes the whole reference fail to parse.
func validDigest(d string) bool {
	i := strings.Index(d, ":")
	if i <= 0 || i+1 == len(d) {
		return false
	}
	n, known := digestHexLen[d[:i]]
	encoded := d[i+1:]
	return known && len(encoded) == n && lowerHex.MatchString(encoded)
}
