"""One masking function for free text: every spelling ramdisks and BMC tools use, in
last_error, log lines (through a real handler) and API error bodies."""

import io
import json
import logging

import flask
import pytest

from inspection.api import errors
from inspection.common.secret_text import install_log_masking, mask_text
from inspection.common.untrusted import for_log, last_error_text
from inspection.errors import BadRequest

#: (text with a secret, the secret, what the masked text must keep).
SPELLINGS = [
    ("ipmi failed: password=Pw-eq1 then", "Pw-eq1", "password=******"),
    ("ipmi failed: password: Pw-colon1 then", "Pw-colon1", "password: ******"),
    ("ipmi failed: Password : Pw-colon2", "Pw-colon2", "Password : ******"),
    ("bmc passwd=Pw-passwd1 user=root", "Pw-passwd1", "passwd=******"),
    ("bmc pwd=Pw-pwd1 user=root", "Pw-pwd1", "pwd=******"),
    ("bmc pass=Pw-pass1 user=root", "Pw-pass1", "pass=******"),
    ("cmd ipmitool -I lanplus -H 192.0.2.1 -U root -P Pw-ipmi1 chassis power status",
     "Pw-ipmi1", "-U root -P ****** chassis"),
    ("cmd ipmitool -H 192.0.2.1 -P Pw-ipmi2 -k Kg-key2 power on", "Kg-key2", "-k ******"),
    ("request X-Auth-Token: gAAAAB-token-1 refused", "gAAAAB-token-1", "X-Auth-Token: ******"),
    ("header Authorization: Basic YWRtaW46UHctYmFzaWM= refused", "YWRtaW46UHctYmFzaWM=",
     "Authorization: Basic ******"),
    ('json {"password": "Pw-json1", "user": "root"}', "Pw-json1", '"password": "******"'),
    ("url https://root:Pw-url1@192.0.2.5/redfish/v1 refused", "Pw-url1",
     "root:******@192.0.2.5"),
    ("cli --password Pw-cli1 --user root", "Pw-cli1", "--password ******"),
]
IDS = [s[1] for s in SPELLINGS]


@pytest.mark.parametrize(("text", "secret", "kept"), SPELLINGS, ids=IDS)
def test_every_spelling_is_masked_in_text_last_error_and_log_values(text, secret, kept):
    for masked in (mask_text(text), last_error_text(text), for_log(text)):
        assert secret not in masked and kept in masked, masked


@pytest.mark.parametrize(("text", "secret", "kept"), SPELLINGS, ids=IDS)
def test_every_log_line_is_masked_by_the_handler(text, secret, kept):
    logger = logging.getLogger("test.secret_text")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        install_log_masking(logger)
        logger.warning("BMC said: %s", text)
    finally:
        logger.removeHandler(handler)
    assert secret not in stream.getvalue() and kept in stream.getvalue()


@pytest.mark.parametrize(("text", "secret", "kept"), SPELLINGS, ids=IDS)
def test_error_bodies_of_the_service_are_masked(text, secret, kept):
    app = flask.Flask(__name__)
    errors.register(app)

    @app.get("/")
    def fail():
        raise BadRequest(f"Ramdisk reported error: {text}")

    body = app.test_client().get("/").get_data(as_text=True)
    fault = json.loads(json.loads(body)["error_message"])
    assert secret not in body and kept in fault["faultstring"]


@pytest.mark.parametrize("text", [
    "passes: 3 of 4 tests", "bypass=on compass=north", "Unable to establish IPMI v2 session",
    "disk sda: 512 bytes sectors", "keyboard layout us"])
def test_ordinary_text_is_left_alone(text):
    assert mask_text(text) == text
