"""A software WebAuthn authenticator for the tests that send a passkey's answers themselves (no browser): it makes
the registration and sign-in answers a browser's `PublicKeyCredential.toJSON()` gives, signed with a real P-256
key, with "none" attestation, and with the user-verified flag on or off."""

import hashlib
import json
import os
import struct

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import bytes_to_base64url

USER_PRESENT, USER_VERIFIED, ATTESTED = 0x01, 0x04, 0x40


class Authenticator:
    def __init__(self, origin, verifies_user=True, credential_id=None, public_key=None):
        self.origin = origin
        self.rp_id = origin.split("://", 1)[1].split(":", 1)[0]
        self.verifies_user = verifies_user
        self.credential_id = credential_id or os.urandom(16)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.count = 0
        self.handle = None
        self.public_key = public_key  # what it says its public key is (CBOR), if not its own

    def register(self, options):
        """The answer to `navigator.credentials.create` for the portal's options (a dict)."""
        self.handle = options["user"]["id"]
        numbers = self.key.public_key().public_numbers()
        public_key = self.public_key or cbor2.dumps(
            {1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")}
        )
        data = (
            self._rp_hash()
            + bytes([self._flags() | ATTESTED])
            + struct.pack(">I", self.count)
            + bytes(16)  # no AAGUID
            + struct.pack(">H", len(self.credential_id))
            + self.credential_id
            + public_key
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": data})
        return self._credential(
            {"clientDataJSON": self._client_data("webauthn.create", options), "attestationObject": _b64(attestation)}
        )

    def sign_in(self, options):
        """The answer to `navigator.credentials.get` for the portal's options (a dict)."""
        self.count += 1
        data = self._rp_hash() + bytes([self._flags()]) + struct.pack(">I", self.count)
        client = self._client_data("webauthn.get", options)
        signed = data + hashlib.sha256(_bytes(client)).digest()
        response = {
            "clientDataJSON": client,
            "authenticatorData": _b64(data),
            "signature": _b64(self.key.sign(signed, ec.ECDSA(hashes.SHA256()))),
            "userHandle": self.handle,
        }
        return self._credential(response)

    def _credential(self, response):
        identifier = _b64(self.credential_id)
        return {"id": identifier, "rawId": identifier, "type": "public-key", "response": response}

    def _client_data(self, kind, options):
        return _b64(json.dumps({"type": kind, "challenge": options["challenge"], "origin": self.origin}).encode())

    def _rp_hash(self):
        return hashlib.sha256(self.rp_id.encode()).digest()

    def _flags(self):
        return USER_PRESENT | (USER_VERIFIED if self.verifies_user else 0)


def _b64(data):
    return bytes_to_base64url(data)


def _bytes(text):
    from webauthn.helpers import base64url_to_bytes

    return base64url_to_bytes(text)
