#!/usr/bin/env python3
"""Raw CHAP login checks (RFC 7143 section 12.1.3, RFC 1994), used by tests/interop/chap.sh.

Each check opens its own connection, walks the security stage by hand and looks at the Login
Response status (RFC 7143 section 11.13.5: 0x0201 authentication failure, 0x0202 authorization
failure). Prints "PASS|FAIL|SKIP name reason" lines; exit 1 if any check failed.
"""

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ixiscsi as X  # noqa: E402

results = []


def report(st, name, why=''):
    line = '%s chap.%s%s' % (st, name, (' ' + why) if why else '')
    print(line, flush=True)
    results.append(st)
    path = os.environ.get('IX_RESULTS')
    if path:
        with open(path, 'a') as f:
            f.write(line + '\n')


class Login:
    """One connection stepping through login by hand."""

    def __init__(self, a, initiator=None):
        self.a = a
        self.conn = X.Conn(a.host, a.port, timeout=10)
        self.isid = X.random_isid()
        self.itt = random.getrandbits(31)
        self.cmdsn = 1
        self.expstatsn = 0
        self.initiator = initiator or a.initiator

    def send(self, csg, nsg, transit, pairs):
        b = X.login_bhs(self.isid, 0, self.itt, 0, self.cmdsn, self.expstatsn, csg, nsg,
                        transit, False)
        self.conn.send_pdu(b, X.encode_keys(pairs))
        try:
            rsp = self.conn.recv_pdu(10)
        except X.Closed:
            return None, {}
        if rsp.opcode == X.OP_LOGIN_RSP:
            self.expstatsn = (rsp.statsn + 1) & 0xffffffff
        return rsp, dict(X.decode_keys(rsp.data))

    def start(self, algs='5'):
        """AuthMethod=CHAP then CHAP_A; returns (rsp, keys) of the CHAP_A answer."""
        rsp, kv = self.send(0, 1, False, [('InitiatorName', self.initiator),
                                          ('SessionType', 'Normal'),
                                          ('TargetName', self.a.iqn),
                                          ('AuthMethod', 'CHAP')])
        if rsp is None or rsp.u16(36) != 0:
            return rsp, kv
        return self.send(0, 1, False, [('CHAP_A', algs)])

    def close(self):
        self.conn.close()


def status(rsp):
    if rsp is None:
        return 'closed'
    if rsp.opcode != X.OP_LOGIN_RSP:
        return rsp.describe()
    return '0x%04x' % rsp.u16(36)


def answer(a, kv, secret=None, name=None):
    alg = int(kv['CHAP_A'])
    ident = int(kv['CHAP_I'])
    chal = X.parse_binary(kv['CHAP_C'])
    r = X.chap_response(alg, ident, (secret or a.secret).encode(), chal)
    return [('CHAP_N', name or a.user), ('CHAP_R', '0x' + r.hex())], alg, chal


def finish(lg, pairs):
    """Send the CHAP response with T=1 NSG=1, then operational stage to FFP."""
    rsp, kv = lg.send(0, 1, True, pairs)
    if rsp is None or rsp.u16(36) != 0:
        return rsp, kv
    while not rsp.flags & 0x80:
        rsp, kv2 = lg.send(0, 1, True, [])
        if rsp is None or rsp.u16(36) != 0:
            return rsp, kv2
        kv.update(kv2)
    rsp, kv2 = lg.send(1, 3, True, list(X.DEFAULT_OP_KEYS))
    kv.update(kv2)
    # RFC 7143 6.3: the target may answer T=0 to keep negotiating; resend T=1 (empty).
    for _ in range(4):
        if rsp is None or rsp.u16(36) != 0 or rsp.flags & 0x83 == 0x83:
            break
        rsp, kv2 = lg.send(1, 3, True, [])
        kv.update(kv2)
    return rsp, kv


def check_alg(a, name, offer, must_succeed):
    lg = Login(a)
    try:
        rsp, kv = lg.start(offer)
        if rsp is None or rsp.u16(36) != 0:
            ok = not must_succeed
            report('PASS' if ok else 'FAIL', name,
                   'CHAP_A=%s refused with %s' % (offer, status(rsp)))
            return
        got = kv.get('CHAP_A')
        if not must_succeed:
            # RFC 7143 12.1.3 / RFC 1994: an algorithm list without a usable entry must not
            # yield a challenge; the target answers CHAP_A=Reject or fails the login.
            if got == 'Reject' or 'CHAP_C' not in kv:
                report('PASS', name, 'CHAP_A=%s answered CHAP_A=%s' % (offer, got))
            else:
                report('FAIL', name, 'CHAP_A=%s accepted as %s with a challenge' % (offer, got))
            return
        offered = offer.split(',')
        if got not in offered:
            report('FAIL', name, 'target chose CHAP_A=%s, not in offered %s' % (got, offer))
            return
        pairs, alg, _ = answer(a, kv)
        rsp, kv = finish(lg, pairs)
        if rsp is not None and rsp.u16(36) == 0 and rsp.flags & 0x83 == 0x83:
            report('PASS', name, 'CHAP_A=%s -> %s, logged in' % (offer, got))
        else:
            report('FAIL', name, 'CHAP_A=%s -> %s but login ended %s' % (
                offer, got, rsp.describe() if rsp is not None else 'closed'))
    except (X.Timeout, X.ProtocolError, OSError, KeyError, ValueError) as e:
        report('FAIL', name, '%s: %s' % (type(e).__name__, e))
    finally:
        lg.close()


def expect_status(a, name, want, run):
    """run(Login) -> rsp; want: set of acceptable status strings."""
    lg = Login(a, getattr(run, 'initiator', None))
    try:
        rsp = run(lg)
        st = status(rsp)
        if st in want:
            report('PASS', name, 'login status %s' % st)
        else:
            report('FAIL', name, 'login status %s, expected %s' % (st, '/'.join(sorted(want))))
    except (X.Timeout, X.ProtocolError, OSError, KeyError, ValueError) as e:
        report('FAIL', name, '%s: %s' % (type(e).__name__, e))
    finally:
        lg.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--iqn', required=True)
    p.add_argument('--initiator', required=True, help='an initiator in the ACL')
    p.add_argument('--outsider', required=True, help='an initiator not in the ACL')
    p.add_argument('--user', required=True)
    p.add_argument('--secret', required=True)
    p.add_argument('--muser')
    p.add_argument('--msecret')
    a = p.parse_args()

    # Algorithm selection (libiscsi only ever offers CHAP_A=5, so this is the place to test
    # the rest). RFC 7143 12.1.3: the target picks one algorithm from the initiator's list.
    check_alg(a, 'alg-md5', '5', True)
    check_alg(a, 'alg-list-5678', '5,6,7,8', True)
    check_alg(a, 'alg-list-8765', '8,7,6,5', True)
    check_alg(a, 'alg-56-not-a-list', '56', False)
    check_alg(a, 'alg-empty', '', False)
    check_alg(a, 'alg-unknown-only', '99', False)

    # Authentication failures -> 0x0201 (RFC 7143 11.13.5). A dropped connection without a
    # status is not acceptable: the initiator must learn why.
    def wrong_secret(lg):
        rsp, kv = lg.start('5')
        pairs, _, _ = answer(a, kv, secret=a.secret + 'x')
        return lg.send(0, 1, True, pairs)[0]
    expect_status(a, 'wrong-secret', {'0x0201'}, wrong_secret)

    def wrong_user(lg):
        rsp, kv = lg.start('5')
        pairs, _, _ = answer(a, kv, name=a.user + '-nobody')
        return lg.send(0, 1, True, pairs)[0]
    expect_status(a, 'unknown-user', {'0x0201'}, wrong_user)

    def short_r(lg):
        rsp, kv = lg.start('5')
        return lg.send(0, 1, True, [('CHAP_N', a.user), ('CHAP_R', '0x0011223344')])[0]
    expect_status(a, 'short-chap-r', {'0x0201'}, short_r)

    def no_r(lg):
        rsp, kv = lg.start('5')
        return lg.send(0, 1, True, [('CHAP_N', a.user)])[0]
    expect_status(a, 'missing-chap-r', {'0x0201', '0x0207'}, no_r)

    def skip_security(lg):
        # CHAP required, but the initiator starts in operational negotiation (CSG=1).
        return lg.send(1, 3, True, [('InitiatorName', lg.initiator), ('SessionType', 'Normal'),
                                    ('TargetName', a.iqn)] + list(X.DEFAULT_OP_KEYS))[0]
    expect_status(a, 'skip-security-stage', {'0x0201'}, skip_security)

    def auth_none(lg):
        return lg.send(0, 1, True, [('InitiatorName', lg.initiator), ('SessionType', 'Normal'),
                                    ('TargetName', a.iqn), ('AuthMethod', 'None')])[0]
    expect_status(a, 'authmethod-none', {'0x0201'}, auth_none)

    # Authorization: an initiator outside the ACL, with valid CHAP credentials -> 0x0202.
    # (Refusing it already at the first PDU is fine too.)
    def outsider(lg):
        rsp, kv = lg.start('5')
        if rsp is None or rsp.u16(36) != 0:
            return rsp
        pairs, _, _ = answer(a, kv)
        return lg.send(0, 1, True, pairs)[0]
    outsider.initiator = a.outsider
    expect_status(a, 'initiator-not-in-acl', {'0x0202'}, outsider)

    if a.muser:
        # Mutual CHAP with a challenge equal to the target's own: a reflection attack the
        # target must refuse (RFC 7143 section 12.1.3: "... MUST NOT ... same challenge").
        def reflect(lg):
            rsp, kv = lg.start('5')
            pairs, alg, chal = answer(a, kv)
            pairs += [('CHAP_I', kv['CHAP_I']), ('CHAP_C', '0x' + chal.hex())]
            return lg.send(0, 1, True, pairs)[0]
        expect_status(a, 'mutual-reflected-challenge', {'0x0201'}, reflect)

        lg = Login(a)
        try:
            rsp, kv = lg.start('5')
            pairs, alg, _ = answer(a, kv)
            my_id = random.getrandbits(8)
            my_chal = os.urandom(16)
            pairs += [('CHAP_I', str(my_id)), ('CHAP_C', '0x' + my_chal.hex())]
            rsp, kv = lg.send(0, 1, True, pairs)
            want = X.chap_response(alg, my_id, a.msecret.encode(), my_chal)
            if rsp is None or rsp.u16(36) != 0:
                report('FAIL', 'mutual-target-response', 'login status %s' % status(rsp))
            elif kv.get('CHAP_N') != a.muser:
                report('FAIL', 'mutual-target-response', 'CHAP_N=%r' % kv.get('CHAP_N'))
            elif X.parse_binary(kv.get('CHAP_R', '0x')) != want:
                report('FAIL', 'mutual-target-response', 'CHAP_R does not prove the secret')
            else:
                report('PASS', 'mutual-target-response', 'target proved its secret')
        except (X.Timeout, X.ProtocolError, OSError, KeyError, ValueError) as e:
            report('FAIL', 'mutual-target-response', '%s: %s' % (type(e).__name__, e))
        finally:
            lg.close()

    # Finally the good path through the library's own login, then one command.
    try:
        s = X.Session(a.host, a.port, initiator=a.initiator, target=a.iqn)
        s.login(chap=(a.user, a.secret),
                mutual=(a.muser, a.msecret) if a.muser else None)
        s.nop(b'after-chap')
        report('PASS', 'good-login-after-failures')
        s.close()
    except Exception as e:  # noqa: BLE001 - any failure here is a test failure
        report('FAIL', 'good-login-after-failures', '%s: %s' % (type(e).__name__, e))

    return 1 if 'FAIL' in results else 0


if __name__ == '__main__':
    sys.exit(main())
