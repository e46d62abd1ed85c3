package resourcespolicy

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Limits that keep hostile or accidental input (the expression comes from a SidecarSet, i.e. from
// any user allowed to create one) from exhausting the stack, memory or CPU. No expression a human
// would write comes near them.
const (
	maxDepth    = 100   // nesting of parentheses, unary minus and function arguments
	maxNodes    = 10000 // AST size; evaluation recurses once per node
	maxExponent = 300   // |e| in 1e<e>; about float64's range, which is what OpenKruise parses into
	maxBits     = 2048  // numerator and denominator size of every intermediate value

	maxMilli = 1 << 62 // MilliValue saturates near int64's bounds; stay clear of them
)

// Expr is a parsed resourcesPolicy expression. It is immutable and safe for concurrent use, so it
// can be parsed once and evaluated for every pod.
type Expr struct {
	src      string
	variable string
	root     *node
}

type nodeKind uint8

const (
	kLit nodeKind = iota
	kVar
	kNeg
	kAdd
	kSub
	kMul
	kDiv
	kMax
	kMin
)

type node struct {
	kind nodeKind
	lit  value
	l, r *node
	pos  int
}

// value is either a unitless number or a quantity. Quantities remember the Kubernetes format the
// result would carry in OpenKruise (which does the arithmetic on resource.Quantity), because that
// format decides how the result prints: 180Mi, not 188743680.
type value struct {
	r   *big.Rat
	qty bool
	fmt resource.Format
}

// Parse parses expr, whose only variable is variable ("cpu" or "memory"). Functions and the
// variable are case-insensitive, as in OpenKruise.
func Parse(expr, variable string) (*Expr, error) {
	if variable != "cpu" && variable != "memory" {
		return nil, fmt.Errorf("expression %q: unsupported variable %q, only cpu or memory", expr, variable)
	}
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("expression %q: empty expression", expr)
	}
	p := &parser{lx: lexer{src: expr}, variable: variable}
	if err := p.advance(); err != nil {
		return nil, err
	}
	root, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errorf(p.tok.pos, "unexpected %s", p.tok.describe())
	}
	return &Expr{src: expr, variable: variable, root: root}, nil
}

// String returns the source text.
func (e *Expr) String() string { return e.src }

// Eval evaluates the expression with the variable bound to v and returns the result as a
// non-negative quantity. A unitless result means cores for cpu and bytes for memory (so "1" is one
// core, or one byte). Precision below a milli-unit is dropped (cpu: below 1m; memory: unitless
// results below one byte), as OpenKruise does.
func (e *Expr) Eval(v resource.Quantity) (resource.Quantity, error) {
	vr, err := ratOfQuantity(v)
	if err != nil {
		return resource.Quantity{}, e.errorf("%s value %s: %v", e.variable, v.String(), err)
	}
	res, err := e.evalWith(value{r: vr, qty: true, fmt: v.Format})
	if err != nil {
		return resource.Quantity{}, err
	}
	return e.toQuantity(res)
}

func (e *Expr) errorf(format string, args ...any) error {
	return fmt.Errorf("expression %q: %s", e.src, fmt.Sprintf(format, args...))
}

// evalWith evaluates and rejects negative results (OpenKruise's calculator refuses them, including
// at validation time).
func (e *Expr) evalWith(v value) (value, error) {
	res, err := eval(e.root, v)
	if err != nil {
		var ee *evalError
		if errors.As(err, &ee) {
			return value{}, e.errorf("%s (at offset %d)", ee.msg, ee.pos)
		}
		return value{}, e.errorf("%v", err)
	}
	if res.r.Sign() < 0 {
		return value{}, e.errorf("result %s is negative", res.r.FloatString(3))
	}
	return res, nil
}

var (
	thousand   = big.NewRat(1000, 1)
	maxInt64   = new(big.Int).SetInt64(1<<63 - 1)
	hundredRat = big.NewRat(100, 1)
)

func (e *Expr) toQuantity(v value) (resource.Quantity, error) {
	if !v.qty && e.variable == "memory" {
		bytes := new(big.Int).Quo(v.r.Num(), v.r.Denom())
		if bytes.Cmp(maxInt64) > 0 {
			return resource.Quantity{}, e.errorf("result %s bytes is out of range", bytes)
		}
		return *resource.NewQuantity(bytes.Int64(), resource.DecimalSI), nil
	}
	m := new(big.Rat).Mul(v.r, thousand)
	milli := new(big.Int).Quo(m.Num(), m.Denom())
	if milli.Cmp(maxInt64) > 0 {
		return resource.Quantity{}, e.errorf("result %s is out of range", v.r.FloatString(3))
	}
	f := v.fmt
	if !v.qty || f == "" {
		f = resource.DecimalSI
	}
	return *resource.NewMilliQuantity(milli.Int64(), f), nil
}

type evalError struct {
	pos int
	msg string
}

func (e *evalError) Error() string { return e.msg }

func eval(n *node, v value) (value, error) {
	switch n.kind {
	case kLit:
		return n.lit, nil
	case kVar:
		return v, nil
	case kNeg:
		x, err := eval(n.l, v)
		if err != nil {
			return value{}, err
		}
		return value{r: new(big.Rat).Neg(x.r), qty: x.qty, fmt: x.fmt}, nil
	}
	l, err := eval(n.l, v)
	if err != nil {
		return value{}, err
	}
	r, err := eval(n.r, v)
	if err != nil {
		return value{}, err
	}
	var res value
	switch n.kind {
	case kAdd, kSub:
		res = value{r: new(big.Rat), qty: l.qty || r.qty}
		if n.kind == kAdd {
			res.r.Add(l.r, r.r)
		} else {
			res.r.Sub(l.r, r.r)
		}
		if res.qty {
			// resource.Quantity.Add keeps the receiver's format unless the receiver is zero.
			res.fmt = formatOf(l)
			if l.r.Sign() == 0 {
				res.fmt = formatOf(r)
			}
		}
	case kMul:
		if l.qty && r.qty {
			return value{}, &evalError{n.pos, "cannot multiply two quantities"}
		}
		res = value{r: new(big.Rat).Mul(l.r, r.r), qty: l.qty || r.qty, fmt: l.fmt}
		if r.qty {
			res.fmt = r.fmt
		}
	case kDiv:
		if r.qty {
			return value{}, &evalError{n.pos, "cannot divide by a quantity"}
		}
		if r.r.Sign() == 0 {
			return value{}, &evalError{n.pos, "division by zero"}
		}
		res = value{r: new(big.Rat).Quo(l.r, r.r), qty: l.qty, fmt: l.fmt}
	case kMax, kMin:
		// Ties pick the left argument, as OpenKruise does; that only matters for the format.
		c := l.r.Cmp(r.r)
		pick := l
		if (n.kind == kMax && c < 0) || (n.kind == kMin && c > 0) {
			pick = r
		}
		if !l.qty && !r.qty {
			return pick, nil
		}
		return value{r: pick.r, qty: true, fmt: formatOf(pick)}, nil
	default:
		return value{}, &evalError{n.pos, fmt.Sprintf("internal error: unknown node kind %d", n.kind)}
	}
	if err := checkRange(res.r); err != nil {
		return value{}, &evalError{n.pos, err.Error()}
	}
	return res, nil
}

// formatOf is the format a value has once it meets a quantity: OpenKruise turns numbers into
// DecimalSI milli-quantities.
func formatOf(v value) resource.Format {
	if !v.qty || v.fmt == "" {
		return resource.DecimalSI
	}
	return v.fmt
}

func checkRange(r *big.Rat) error {
	if r.Num().BitLen() > maxBits || r.Denom().BitLen() > maxBits {
		return errors.New("value out of range")
	}
	return nil
}

// ratOfQuantity converts exactly. Quantities decoded from JSON/YAML are at most 2^63-1 with nano
// precision; the scale guard only stops a hand-built inf.Dec from making us compute 10^huge.
func ratOfQuantity(q resource.Quantity) (*big.Rat, error) {
	// Fast path for the usual case, a value with at most milli precision that fits int64 milli.
	if m := q.MilliValue(); m > -maxMilli && m < maxMilli && resource.NewMilliQuantity(m, q.Format).Cmp(q) == 0 {
		return big.NewRat(m, 1000), nil
	}
	d := q.AsDec() // q is a copy; AsDec only rewrites the copy's representation
	scale := int64(d.Scale())
	if scale > 64 || scale < -64 {
		return nil, errors.New("quantity out of range")
	}
	r := new(big.Rat).SetInt(d.UnscaledBig())
	if scale != 0 {
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs(scale)), nil)
		if scale > 0 {
			r.Quo(r, new(big.Rat).SetInt(p))
		} else {
			r.Mul(r, new(big.Rat).SetInt(p))
		}
	}
	if err := checkRange(r); err != nil {
		return nil, err
	}
	return r, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// ---- lexer ----

type tokKind uint8

const (
	tEOF tokKind = iota
	tLit
	tIdent
	tPlus
	tMinus
	tStar
	tSlash
	tLParen
	tRParen
	tComma
)

type token struct {
	kind tokKind
	pos  int
	text string
	val  value
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tLit:
		return fmt.Sprintf("literal %q", t.text)
	case tIdent:
		return fmt.Sprintf("identifier %q", t.text)
	default:
		return fmt.Sprintf("%q", t.text)
	}
}

type lexer struct {
	src string
	pos int
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// validUnits are the suffixes OpenKruise's lexer accepts; E/Ei would clash with exponents.
var validUnits = map[string]bool{
	"m": true, "k": true, "M": true, "G": true, "T": true, "P": true,
	"Ki": true, "Mi": true, "Gi": true, "Ti": true, "Pi": true,
}

func punct(c byte) (tokKind, bool) {
	switch c {
	case '+':
		return tPlus, true
	case '-':
		return tMinus, true
	case '*':
		return tStar, true
	case '/':
		return tSlash, true
	case '(':
		return tLParen, true
	case ')':
		return tRParen, true
	case ',':
		return tComma, true
	}
	return tEOF, false
}

func (lx *lexer) next() (token, *evalError) {
	for lx.pos < len(lx.src) && isSpace(lx.src[lx.pos]) {
		lx.pos++
	}
	start := lx.pos
	if start >= len(lx.src) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := lx.src[start]
	if k, ok := punct(c); ok {
		lx.pos++
		return token{kind: k, pos: start, text: string(c)}, nil
	}
	switch {
	case isDigit(c) || c == '.':
		return lx.number()
	case isLetter(c):
		for lx.pos < len(lx.src) && (isLetter(lx.src[lx.pos]) || isDigit(lx.src[lx.pos]) || lx.src[lx.pos] == '_') {
			lx.pos++
		}
		return token{kind: tIdent, pos: start, text: lx.src[start:lx.pos]}, nil
	}
	return token{}, &evalError{start, fmt.Sprintf("unexpected character %q", lx.src[start:start+1])}
}

// number reads a plain number (1, 0.5, .5, 1e3), a percentage (50% = 0.5) or a Kubernetes quantity
// (50m, 100Mi, 1.5Gi). OpenKruise silently turns malformed numbers such as "5x" or "1e" into 0;
// they are errors here.
func (lx *lexer) number() (token, *evalError) {
	s, start := lx.src, lx.pos
	digits := 0
	for lx.pos < len(s) && isDigit(s[lx.pos]) {
		lx.pos++
		digits++
	}
	if lx.pos < len(s) && s[lx.pos] == '.' {
		lx.pos++
		for lx.pos < len(s) && isDigit(s[lx.pos]) {
			lx.pos++
			digits++
		}
	}
	hasExp := false
	if digits > 0 && lx.pos < len(s) && (s[lx.pos] == 'e' || s[lx.pos] == 'E') {
		j := lx.pos + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			ds := j
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			n, err := strconv.Atoi(s[ds:j])
			if err != nil || n > maxExponent {
				return token{}, &evalError{start, fmt.Sprintf("number %q out of range", s[start:j])}
			}
			hasExp, lx.pos = true, j
		}
	}
	numText := s[start:lx.pos]
	if digits == 0 {
		return token{}, &evalError{start, fmt.Sprintf("invalid number %q", numText)}
	}
	switch {
	case lx.pos < len(s) && s[lx.pos] == '%':
		lx.pos++
		r, ok := new(big.Rat).SetString(numText)
		if !ok {
			return token{}, &evalError{start, fmt.Sprintf("invalid percentage %q", s[start:lx.pos])}
		}
		r.Quo(r, hundredRat)
		return token{kind: tLit, pos: start, text: s[start:lx.pos], val: value{r: r}}, nil
	case lx.pos < len(s) && isLetter(s[lx.pos]):
		for lx.pos < len(s) && isLetter(s[lx.pos]) {
			lx.pos++
		}
		text := s[start:lx.pos]
		if hasExp || !validUnits[s[start+len(numText):lx.pos]] {
			return token{}, &evalError{start, fmt.Sprintf("invalid quantity %q (units: m, k, M, G, T, P, Ki, Mi, Gi, Ti, Pi)", text)}
		}
		q, err := resource.ParseQuantity(text)
		if err != nil {
			return token{}, &evalError{start, fmt.Sprintf("invalid quantity %q: %v", text, err)}
		}
		r, err := ratOfQuantity(q)
		if err != nil {
			return token{}, &evalError{start, fmt.Sprintf("invalid quantity %q: %v", text, err)}
		}
		return token{kind: tLit, pos: start, text: text, val: value{r: r, qty: true, fmt: q.Format}}, nil
	}
	r, ok := new(big.Rat).SetString(numText)
	if !ok {
		return token{}, &evalError{start, fmt.Sprintf("invalid number %q", numText)}
	}
	return token{kind: tLit, pos: start, text: numText, val: value{r: r}}, nil
}

// ---- parser ----
//
// Grammar (OpenKruise's yacc grammar, pkg/util/calculator/calculator.y):
//
//	expr   = term { ("+" | "-") term }
//	term   = factor { ("*" | "/") factor }
//	factor = literal | variable | "(" expr ")" | "-" factor | func "(" expr [ "," expr ] ")"
//
// A one-argument call parses there and fails at evaluation; here it fails at parse time.

type parser struct {
	lx       lexer
	tok      token
	variable string
	nodes    int
}

func (p *parser) errorf(pos int, format string, args ...any) error {
	return fmt.Errorf("expression %q: %s (at offset %d)", p.lx.src, fmt.Sprintf(format, args...), pos)
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return p.errorf(err.pos, "%s", err.msg)
	}
	p.tok = t
	return nil
}

func (p *parser) newNode(n node) (*node, error) {
	p.nodes++
	if p.nodes > maxNodes {
		return nil, p.errorf(n.pos, "expression too long (more than %d terms)", maxNodes)
	}
	return &n, nil
}

func (p *parser) expr(depth int) (*node, error) {
	l, err := p.term(depth)
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tPlus || p.tok.kind == tMinus {
		k, pos := kAdd, p.tok.pos
		if p.tok.kind == tMinus {
			k = kSub
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.term(depth)
		if err != nil {
			return nil, err
		}
		if l, err = p.newNode(node{kind: k, l: l, r: r, pos: pos}); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (p *parser) term(depth int) (*node, error) {
	l, err := p.factor(depth)
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tStar || p.tok.kind == tSlash {
		k, pos := kMul, p.tok.pos
		if p.tok.kind == tSlash {
			k = kDiv
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.factor(depth)
		if err != nil {
			return nil, err
		}
		if l, err = p.newNode(node{kind: k, l: l, r: r, pos: pos}); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (p *parser) factor(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, p.errorf(p.tok.pos, "expression nested too deeply (more than %d levels)", maxDepth)
	}
	t := p.tok
	switch t.kind {
	case tLit:
		if err := p.advance(); err != nil {
			return nil, err
		}
		if err := checkRange(t.val.r); err != nil {
			return nil, p.errorf(t.pos, "literal %q: %v", t.text, err)
		}
		return p.newNode(node{kind: kLit, lit: t.val, pos: t.pos})
	case tMinus:
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.factor(depth + 1)
		if err != nil {
			return nil, err
		}
		return p.newNode(node{kind: kNeg, l: x, pos: t.pos})
	case tLParen:
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.expr(depth + 1)
		if err != nil {
			return nil, err
		}
		if err := p.expect(tRParen, "\")\""); err != nil {
			return nil, err
		}
		return x, nil
	case tIdent:
		if err := p.advance(); err != nil {
			return nil, err
		}
		name := strings.ToLower(t.text)
		if p.tok.kind == tLParen {
			return p.call(t, name, depth)
		}
		if name != p.variable {
			return nil, p.errorf(t.pos, "undefined variable %q (only %s is allowed here)", t.text, p.variable)
		}
		return p.newNode(node{kind: kVar, pos: t.pos})
	}
	return nil, p.errorf(t.pos, "unexpected %s", t.describe())
}

func (p *parser) call(fn token, name string, depth int) (*node, error) {
	var k nodeKind
	switch name {
	case "max":
		k = kMax
	case "min":
		k = kMin
	default:
		return nil, p.errorf(fn.pos, "unknown function %q (only max and min)", fn.text)
	}
	if err := p.advance(); err != nil { // "("
		return nil, err
	}
	a, err := p.expr(depth + 1)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tComma {
		if p.tok.kind == tRParen {
			return nil, p.errorf(fn.pos, "%s() requires exactly 2 arguments, got 1", name)
		}
		return nil, p.errorf(p.tok.pos, "unexpected %s in %s() arguments", p.tok.describe(), name)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	b, err := p.expr(depth + 1)
	if err != nil {
		return nil, err
	}
	if p.tok.kind == tComma {
		return nil, p.errorf(fn.pos, "%s() requires exactly 2 arguments, got more", name)
	}
	if err := p.expect(tRParen, "\")\""); err != nil {
		return nil, err
	}
	return p.newNode(node{kind: k, l: a, r: b, pos: fn.pos})
}

func (p *parser) expect(k tokKind, what string) error {
	if p.tok.kind != k {
		return p.errorf(p.tok.pos, "expected %s, found %s", what, p.tok.describe())
	}
	return p.advance()
}
