# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CEL of DRA device selectors: a faithful subset of cel-go's compiler (syntax errors and the type errors of
operators on known types, with cel-go's message shape), as the apiserver checks a DeviceClass, and an
evaluator of the selector subset the collection uses, as the scheduler matches devices.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re


class CelError(Exception):
    def __init__(self, offset, message):
        super(CelError, self).__init__(message)
        self.offset = offset
        self.message = message


OPERAND_EXPECTED = ("{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
                    "BYTES, IDENTIFIER}")
_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>0[xX][0-9a-fA-F]+[uU]?|[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|[0-9]+[uU]?)
  | (?P<str>[bB]?[rR]?("([^"\\\n]|\\.)*"|'([^'\\\n]|\\.)*'))
  | (?P<id>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|[<>+\-*/%!?:.,\[\](){}])
""", re.VERBOSE)
RESERVED = ("true", "false", "null", "in")
# the DRA CEL environment (k8s.io/dynamic-resource-allocation/cel): one variable, `device`
# (map types carry cel-go's full name for the "must evaluate to bool" message; measured on v1.36.2)
DEVICE_FIELDS = {"driver": "string", "attributes": "map(string, map(string, google.protobuf.Any))",
                 "capacity": "map(string, map(string, kubernetes.Quantity))", "allowMultipleAllocations": "bool"}
# how cel-go names the types this subset does not track in full
TYPE_NAMES = {"list": "list(dyn)", "map": "map(dyn, dyn)"}
GLOBAL_FUNCTIONS = ("size", "has", "int", "uint", "double", "string", "bytes", "bool", "dyn", "type", "duration",
                    "timestamp", "matches", "quantity", "isQuantity", "semver", "isSemver", "url", "isURL", "ip",
                    "isIP", "cidr", "isCIDR", "format")
NUMERIC = ("int", "uint", "double")


def _tokenize(text):
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise CelError(pos, "Syntax error: token recognition error at: '%s'" % text[pos])
        if not m.group("ws"):
            kind = m.lastgroup
            value = m.group(kind)
            if kind == "id" and value in RESERVED:
                kind = "op" if value == "in" else "lit"
            tokens.append((kind, value, pos))
        pos = m.end()
    tokens.append(("eof", "<EOF>", len(text)))
    return tokens


class _Parser:
    """Recursive descent over CEL's grammar; returns the expression's type ('dyn' when unknown)."""

    def __init__(self, text):
        self.tokens = _tokenize(text)
        self.i = 0
        # cel-go parses first and type-checks after: a syntax error anywhere wins over a type error
        self.type_error = None

    def check(self, fn, *args):
        try:
            return fn(*args)
        except CelError as err:
            self.type_error = self.type_error or err
            return "dyn"

    def undeclared(self, name, pos):
        self.type_error = self.type_error or CelError(pos, "undeclared reference to '%s' (in container '')" % name)
        return "dyn"

    def peek(self):
        return self.tokens[self.i]

    def take(self):
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, value):
        tok = self.peek()
        if tok[1] != value or tok[0] not in ("op",):
            raise CelError(tok[2], "Syntax error: mismatched input '%s' expecting '%s'" % (tok[1], value))
        return self.take()

    def parse(self):
        typ = self.expr()
        tok = self.peek()
        if tok[0] != "eof":
            raise CelError(tok[2], "Syntax error: mismatched input '%s' expecting <EOF>" % tok[1])
        if self.type_error is not None:
            raise self.type_error
        return typ

    def expr(self):
        cond = self.binary(0)
        if self.peek()[1] == "?" and self.peek()[0] == "op":
            where = self.take()[2]
            self.check(_need, cond[0], ("bool",), "_?_:_", cond[0], where)
            left = self.binary(0)
            self.expect(":")
            right = self.expr()
            return (left[0] if left[0] == right[0] else "dyn", cond[1])
        return cond

    LEVELS = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%"))

    def binary(self, level):
        if level == len(self.LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in self.LEVELS[level]:
            op_tok = self.take()
            right = self.binary(level + 1)
            left = (self.check(_binary_type, op_tok[1], left[0], right[0], op_tok[2]), left[1])
        return left

    def unary(self):
        tok = self.peek()
        if tok[0] == "op" and tok[1] in ("!", "-"):
            self.take()
            operand = self.unary()
            if tok[1] == "!":
                self.check(_need, operand[0], ("bool",), "!_", operand[0], tok[2])
                return ("bool", tok[2])
            self.check(_need, operand[0], ("int", "double"), "-_", operand[0], tok[2])
            return (operand[0], tok[2])
        return self.member()

    def member(self):
        typ, start = self.primary()
        while self.peek()[0] == "op" and self.peek()[1] in (".", "["):
            tok = self.take()
            if tok[1] == ".":
                name = self.take()
                if name[0] != "id":
                    raise CelError(name[2], "Syntax error: mismatched input '%s' expecting IDENTIFIER" % name[1])
                if self.peek()[1] == "(" and self.peek()[0] == "op":
                    self.take()
                    self.args(")")
                    typ = "bool" if name[1] in ("startsWith", "endsWith", "contains", "matches", "exists",
                                                "all", "exists_one", "isGreaterThan", "isLessThan") else "dyn"
                elif typ == "device":
                    if name[1] not in DEVICE_FIELDS:   # cel-go points at the dot (measured on v1.36.2)
                        self.type_error = self.type_error or CelError(tok[2], "undefined field '%s'" % name[1])
                    typ = DEVICE_FIELDS.get(name[1], "dyn")
                else:
                    typ = "dyn"
            else:
                self.expr()
                self.expect("]")
                typ = "dyn"
        return (typ, start)

    def args(self, closing):
        if self.peek()[1] == closing and self.peek()[0] == "op":
            self.take()
            return
        first = True
        while True:
            if first and closing == ")":
                first = False
                start = self.peek()[2]
                try:
                    self.expr()
                except CelError as err:   # an empty argument list was possible: ')' is expected too (v1.36.2)
                    if err.offset == start and err.message.endswith(OPERAND_EXPECTED):
                        err.message = err.message.replace("'(', '.'", "'(', ')', '.'")
                    raise
            else:
                self.expr()
            tok = self.peek()
            if tok[0] == "op" and tok[1] == ",":
                self.take()
                continue
            if tok[0] == "op" and tok[1] == closing:
                self.take()
                return
            raise CelError(tok[2], "Syntax error: mismatched input '%s' expecting {')', ','}" % tok[1]
                           if closing == ")" else "Syntax error: mismatched input '%s' expecting {'%s', ','}"
                           % (tok[1], closing))

    def primary(self):
        tok = self.take()
        kind, value, pos = tok
        if kind == "num":
            if value.lower().endswith("u"):
                return ("uint", pos)
            return ("double" if ("." in value or ("e" in value.lower() and not value.lower().startswith("0x")))
                    else "int", pos)
        if kind == "str":
            return ("bytes" if value[0] in "bB" else "string", pos)
        if kind == "lit":
            return ("null_type" if value == "null" else "bool", pos)
        if kind == "id":
            if self.peek()[1] == "(" and self.peek()[0] == "op":
                self.take()
                self.args(")")
                if value not in GLOBAL_FUNCTIONS:
                    return (self.undeclared(value, pos), pos)
                return ({"size": "int", "has": "bool", "int": "int", "uint": "uint", "double": "double",
                         "string": "string", "bool": "bool"}.get(value, "dyn"), pos)
            if value != "device":
                return (self.undeclared(value, pos), pos)
            return ("device", pos)
        if kind == "op" and value == "(":
            inner = self.expr()
            self.expect(")")
            return (inner[0], pos)
        if kind == "op" and value == "[":
            self.args("]")
            return ("list", pos)
        if kind == "op" and value == "{":
            if not (self.peek()[1] == "}" and self.peek()[0] == "op"):
                while True:
                    self.expr()
                    self.expect(":")
                    self.expr()
                    if self.peek()[1] == "," and self.peek()[0] == "op":
                        self.take()
                        continue
                    break
            self.expect("}")
            return ("map", pos)
        raise CelError(pos, "Syntax error: mismatched input '%s' expecting %s" % (value, OPERAND_EXPECTED))


def _kind(typ):
    return typ.split("(", 1)[0]


def _need(typ, allowed, op, shown, pos):
    if _kind(typ) not in allowed and typ != "dyn":
        raise CelError(pos, "found no matching overload for '%s' applied to '(%s)'" % (op, shown))


def _binary_type(op, left, right, pos):
    name = "@in" if op == "in" else "_%s_" % op
    if "dyn" in (left, right):
        return "bool" if op in ("==", "!=", "<", "<=", ">", ">=", "in", "&&", "||") else "dyn"
    ok = True
    if op in ("&&", "||"):
        ok = left == right == "bool"
        result = "bool"
    elif op in ("==", "!="):
        ok = left == right or "null_type" in (left, right)
        result = "bool"
    elif op in ("<", "<=", ">", ">="):
        ok = (left == right and left in NUMERIC + ("string", "bytes", "bool")) or (left in NUMERIC and right in NUMERIC)
        result = "bool"
    elif op == "in":
        ok = _kind(right) in ("list", "map")
        result = "bool"
    elif op == "+":
        ok = left == right and _kind(left) in NUMERIC + ("string", "bytes", "list")
        result = left
    elif op == "%":
        ok = left == right and left in ("int", "uint")
        result = left
    else:
        ok = left == right and left in NUMERIC
        result = left
    if not ok:
        raise CelError(pos, "found no matching overload for '%s' applied to '(%s, %s)'" % (name, left, right))
    return result


def compile_cel(expression):
    """None, or the detail the apiserver gives for a DeviceClass selector that does not compile.

    Shape from cel-go's issue formatting as the apiserver reports it: ``compilation failed: ERROR:
    <input>:LINE:COL: MESSAGE`` followed by the source line and a caret (columns 1-based).
    """
    try:
        typ = _Parser(expression).parse()[0]
    except CelError as err:
        before = expression[:err.offset]
        line = before.count("\n") + 1
        column = err.offset - (before.rfind("\n") + 1)
        source = expression.split("\n")[line - 1]
        return "compilation failed: ERROR: <input>:%d:%d: %s\n | %s\n | %s^" % (
            line, column + 1, err.message, source, "." * column)
    if typ not in ("bool", "dyn"):
        return "must evaluate to bool or the unknown type, not %s" % TYPE_NAMES.get(typ, typ)
    return None


class _Unsupported(Exception):
    pass


class _Evaluator:
    """Evaluates the selector subset the collection uses against one device: device.driver,
    device.attributes["<domain>"].<name> (or ["<name>"]), literals, == != < <= > >=, && || !, parentheses."""

    def __init__(self, text, device):
        self.tokens = _tokenize(text)
        self.i = 0
        self.device = device

    def peek(self):
        return self.tokens[self.i]

    def take(self, value=None):
        tok = self.tokens[self.i]
        if value is not None and tok[1] != value:
            raise _Unsupported(tok[1])
        self.i += 1
        return tok

    def run(self):
        value = self.disjunction()
        if self.peek()[0] != "eof":
            raise _Unsupported(self.peek()[1])
        return value is True

    def disjunction(self):
        value = self.conjunction()
        while self.peek()[1] == "||":
            self.take()
            right = self.conjunction()
            value = value is True or right is True
        return value

    def conjunction(self):
        value = self.comparison()
        while self.peek()[1] == "&&":
            self.take()
            right = self.comparison()
            value = value is True and right is True
        return value

    def comparison(self):
        left = self.unary()
        op = self.peek()[1]
        if self.peek()[0] == "op" and op in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            right = self.unary()
            if op == "==":
                return left == right
            if op == "!=":
                return left != right
            if left is None or right is None or type(left) is not type(right):
                return False
            return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
        return left

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return self.unary() is not True
        if self.peek()[1] == "(":
            self.take()
            value = self.disjunction()
            self.take(")")
            return value
        return self.operand()

    def operand(self):
        kind, value, _pos = self.take()
        if kind == "str":
            return json.loads(value) if value.startswith('"') else value[1:-1]
        if kind == "num":
            return float(value) if "." in value else int(value.rstrip("uU"), 0)
        if kind == "lit":
            return {"true": True, "false": False, "null": None}[value]
        if kind != "id" or value != "device":
            raise _Unsupported(value)
        self.take(".")
        field = self.take()[1]
        if field == "driver":
            return self.device["driver"]
        if field not in ("attributes", "capacity"):
            raise _Unsupported(field)
        self.take("[")
        domain = self.operand()  # a string literal, in single or double quotes as CEL allows
        self.take("]")
        if self.peek()[1] == ".":
            self.take()
            name = self.take()[1]
        else:
            self.take("[")
            name = self.operand()
            self.take("]")
        entries = self.device.get(field) or {}
        entry = entries.get("%s/%s" % (domain, name))
        if entry is None and domain == self.device["driver"]:
            entry = entries.get(name)
        if not isinstance(entry, dict):
            return None
        for key in ("string", "int", "bool", "version", "value"):
            if key in entry:
                return entry[key]
        return None


def selector_matches(expression, device):
    """Whether a device (with its driver) satisfies a selector; expressions beyond the subset match nothing."""
    try:
        return _Evaluator(expression, device).run()
    except (_Unsupported, CelError, ValueError, IndexError, KeyError, TypeError):
        return False
