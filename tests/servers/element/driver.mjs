// A person on a current Element, for squidd's Matrix tests: matrix-js-sdk with its Rust
// crypto, sharing room keys only with devices their owner cross-signed ("exclude insecure
// devices", MSC4153: OnlySignedDevicesIsolationMode), cross-signing itself on request.
//
// Speaks JSON lines: each stdin line is {"id": N, "cmd": "...", ...args}; each answer is
// {"id": N, "ok": true, "result": ...} or {"id": N, "ok": false, "error": "..."} on stdout.
// Commands run concurrently, so a long wait does not block a later command. Everything the
// SDK logs goes to stderr. Usage: node driver.mjs MODULES_DIR (the npm ci'd node_modules).

import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

// matrix-js-sdk 43 declares Node >= 22; on Node 20 this is all it misses.
if (typeof Promise.withResolvers !== "function") {
    Promise.withResolvers = function withResolvers() {
        let resolve, reject;
        const promise = new this((res, rej) => ((resolve = res), (reject = rej)));
        return { promise, resolve, reject };
    };
}

const out = process.stdout.write.bind(process.stdout);
for (const name of ["log", "info", "debug", "warn", "error", "trace"]) {
    console[name] = (...args) => process.stderr.write(args.map(String).join(" ") + "\n");
}

const modules = process.argv[2];
if (!modules) {
    process.stderr.write("usage: node driver.mjs MODULES_DIR\n");
    process.exit(2);
}
const load = (rel) => import(pathToFileURL(path.join(modules, "matrix-js-sdk", "lib", rel)).href);
const sdk = await load("matrix.js");
const cryptoApi = await load("crypto-api/index.js");
const { logger } = await load("logger.js");
logger.setLevel(process.env.ELEMENT_DRIVER_LOG_LEVEL || "warn");

const { ClientEvent, RoomEvent, RoomMemberEvent, MatrixEventEvent, createClient, MemoryStore } = sdk;
const {
    CryptoEvent,
    OnlySignedDevicesIsolationMode,
    VerificationPhase,
    VerificationRequestEvent,
    VerifierEvent,
    EventShieldColour,
    EventShieldReason,
} = cryptoApi;

let client = null;
let userId = null;
let password = null;
const messages = new Map(); // event id -> MatrixEvent, in arrival order
const toDevice = []; // unencrypted/decrypted to-device events seen (withheld notices among them)
const flows = new Map(); // flow id -> {request, sas, verifier, verifyDone, error}
let flowSeq = 0;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(predicate, what, timeoutMs) {
    const deadline = Date.now() + (timeoutMs ?? 30000);
    for (;;) {
        const value = await predicate();
        if (value) return value;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await sleep(50);
    }
}

function crypto() {
    const api = client?.getCrypto();
    if (!api) throw new Error("not logged in");
    return api;
}

// --- login and identity -------------------------------------------------------------------

async function login({ homeserver, user_id, password: pw, auto_join = true }) {
    const bare = createClient({ baseUrl: homeserver });
    const resp = await bare.loginRequest({
        type: "m.login.password",
        identifier: { type: "m.id.user", user: user_id },
        password: pw,
        initial_device_display_name: "element-test",
    });
    userId = resp.user_id;
    password = pw;
    client = createClient({
        baseUrl: homeserver,
        userId: resp.user_id,
        deviceId: resp.device_id,
        accessToken: resp.access_token,
        store: new MemoryStore(),
    });
    await client.initRustCrypto({ useIndexedDB: false });
    // What Element's "exclude insecure devices" setting sets (its default since 2026).
    crypto().setDeviceIsolationMode(new OnlySignedDevicesIsolationMode());
    client.on(RoomEvent.Timeline, (event) => track(event));
    client.on(ClientEvent.ToDeviceEvent, (event) =>
        toDevice.push({ type: event.getType(), sender: event.getSender(), content: event.getContent() }),
    );
    client.on(CryptoEvent.VerificationRequestReceived, (request) => addFlow(request));
    if (auto_join) {
        client.on(RoomMemberEvent.Membership, (_event, member) => {
            if (member.userId === userId && member.membership === "invite") {
                client.joinRoom(member.roomId).catch((e) => console.warn("join failed", e));
            }
        });
    }
    const synced = new Promise((resolve) =>
        client.on(ClientEvent.Sync, (state) => state === "PREPARED" && resolve()),
    );
    await client.startClient({ initialSyncLimit: 50 });
    await synced;
    return { user_id: resp.user_id, device_id: resp.device_id };
}

function track(event) {
    const type = event.getType();
    if (type !== "m.room.message" && type !== "m.room.encrypted") return;
    if (!messages.has(event.getId())) messages.set(event.getId(), event);
}

// `reset`: a new identity even though one exists, as "Reset cryptographic identity" does.
async function bootstrapCrossSigning({ reset = false }) {
    await crypto().bootstrapCrossSigning({
        setupNewCrossSigning: reset,
        authUploadDeviceSigningKeys: async (makeRequest) => {
            // Synapse lets a first upload through without auth; answer a demand with the password.
            try {
                await makeRequest(null);
            } catch (e) {
                const session = e?.data?.session;
                if (!session) throw e;
                await makeRequest({
                    type: "m.login.password",
                    identifier: { type: "m.id.user", user: userId },
                    password,
                    session,
                });
            }
        },
    });
    return crossSigningStatus();
}

async function crossSigningStatus() {
    const status = await crypto().getCrossSigningStatus();
    return {
        ready: await crypto().isCrossSigningReady(),
        master_key: await crypto().getCrossSigningKeyId(),
        public_keys_on_device: status.publicKeysOnDevice,
        private_keys_cached: status.privateKeysCachedLocally,
    };
}

async function userTrust({ user_id }) {
    const status = await crypto().getUserVerificationStatus(user_id);
    const identity = await client.getCrypto().getUserDeviceInfo([user_id], true);
    return {
        known: status.known,
        verified: status.isCrossSigningVerified(),
        was_verified: status.wasCrossSigningVerified(),
        needs_user_approval: status.needsUserApproval,
        devices: [...(identity.get(user_id)?.keys() ?? [])],
    };
}

async function waitDevices({ user_id, timeout_ms }) {
    return waitFor(
        async () => {
            const devices = (await crypto().getUserDeviceInfo([user_id], true)).get(user_id);
            return devices?.size ? [...devices.keys()] : null;
        },
        `the devices of ${user_id}`,
        timeout_ms,
    );
}

// Verifying someone else signs their master key with our user-signing key and uploads it;
// the identity counts as verified once that signature is back from the server.
async function waitUserVerified({ user_id, timeout_ms }) {
    await waitFor(
        async () => (await crypto().getUserVerificationStatus(user_id)).isCrossSigningVerified(),
        `${user_id} verified`,
        timeout_ms,
    );
    return userTrust({ user_id });
}

async function waitNeedsApproval({ user_id, timeout_ms }) {
    await waitFor(
        async () => (await crypto().getUserVerificationStatus(user_id)).needsUserApproval,
        `${user_id}'s identity change to show`,
        timeout_ms,
    );
    return userTrust({ user_id });
}

async function deviceTrust({ user_id, device_id }) {
    const status = await crypto().getDeviceVerificationStatus(user_id, device_id);
    if (!status) return null;
    return {
        signed_by_owner: status.signedByOwner,
        cross_signing_verified: status.crossSigningVerified,
        locally_verified: status.localVerified,
    };
}

// --- rooms and messages -------------------------------------------------------------------

async function createRoom({ invite, encrypted = true, direct = false }) {
    const { room_id } = await client.createRoom({
        is_direct: direct,
        invite,
        preset: direct ? "trusted_private_chat" : "private_chat",
        initial_state: encrypted
            ? [{ type: "m.room.encryption", state_key: "", content: { algorithm: "m.megolm.v1.aes-sha2" } }]
            : [],
    });
    if (direct) {
        const map = client.getAccountData("m.direct")?.getContent() ?? {};
        for (const user of invite) map[user] = [...(map[user] ?? []), room_id];
        await client.setAccountData("m.direct", map);
    }
    return { room_id };
}

const createDm = ({ user_id, encrypted = true }) => createRoom({ invite: [user_id], encrypted, direct: true });

async function waitJoined({ room_id, user_id, timeout_ms }) {
    await waitFor(
        () => client.getRoom(room_id)?.getMember(user_id)?.membership === "join",
        `${user_id} to join ${room_id}`,
        timeout_ms,
    );
    return true;
}

async function sendText({ room_id, body }) {
    await waitFor(() => client.getRoom(room_id), `room ${room_id}`, 30000);
    const { event_id } = await client.sendTextMessage(room_id, body);
    return { event_id };
}

const shieldNames = (info) =>
    info && {
        colour: EventShieldColour[info.shieldColour],
        reason: info.shieldReason === null ? null : EventShieldReason[info.shieldReason],
    };

async function describe(event) {
    const failed = event.isDecryptionFailure();
    const encrypted = event.isEncrypted();
    const content = event.getContent();
    return {
        event_id: event.getId(),
        room_id: event.getRoomId(),
        sender: event.getSender(),
        type: event.getType(),
        encrypted,
        pending: encrypted && !failed && event.getType() === "m.room.encrypted",
        body: failed ? null : (content.body ?? null),
        in_reply_to: content["m.relates_to"]?.["m.in_reply_to"]?.event_id ?? null,
        failure: failed ? event.decryptionFailureReason : null,
        shield: encrypted && !failed ? shieldNames(await crypto().getEncryptionInfoForEvent(event)) : null,
    };
}

async function listMessages({ room_id = null, sender = null }) {
    const found = [];
    for (const event of messages.values()) {
        if (room_id && event.getRoomId() !== room_id) continue;
        if (sender && event.getSender() !== sender) continue;
        found.push(await describe(event));
    }
    return found;
}

// Wait until `count` messages from `sender` (in `room_id`) are settled: decrypted or failed.
async function waitMessages({ room_id = null, sender = null, count = 1, timeout_ms }) {
    return waitFor(
        async () => {
            const found = await listMessages({ room_id, sender });
            const settled = found.filter((m) => !m.pending);
            return settled.length >= count ? settled : null;
        },
        `${count} message(s) from ${sender ?? "anyone"}`,
        timeout_ms,
    );
}

// --- verification (SAS) -------------------------------------------------------------------

function addFlow(request) {
    for (const [id, flow] of flows) if (flow.request === request) return id;
    const id = `f${++flowSeq}`;
    const flow = { request, sas: null, verifier: null, verifyDone: false, error: null };
    flows.set(id, flow);
    const attach = () => {
        const verifier = request.verifier;
        if (!verifier || flow.verifier) return;
        flow.verifier = verifier;
        verifier.on(VerifierEvent.ShowSas, (sas) => (flow.sas = sas));
        verifier.verify().then(
            () => (flow.verifyDone = true),
            (e) => (flow.error = String(e?.message ?? e)),
        );
    };
    request.on(VerificationRequestEvent.Change, attach);
    attach();
    return id;
}

function flowOf(flow_id) {
    const flow = flows.get(flow_id);
    if (!flow) throw new Error(`no verification flow ${flow_id}`);
    return flow;
}

function flowState(id, flow) {
    const r = flow.request;
    const sas = flow.sas?.sas;
    return {
        flow_id: id,
        phase: VerificationPhase[r.phase],
        other_user_id: r.otherUserId,
        other_device_id: r.otherDeviceId ?? null,
        room_id: r.roomId ?? null,
        transaction_id: r.transactionId ?? null,
        initiated_by_me: r.initiatedByMe,
        method: r.chosenMethod,
        emoji: sas?.emoji ? sas.emoji.map(([symbol, name]) => [symbol, name]) : null,
        decimal: sas?.decimal ?? null,
        cancel_code: r.cancellationCode,
        cancelled_by: r.cancellingUserId ?? null,
        verify_done: flow.verifyDone,
        error: flow.error,
    };
}

async function requestVerification({ user_id, device_id = null, room_id = null }) {
    const request = room_id
        ? await crypto().requestVerificationDM(user_id, room_id)
        : await crypto().requestDeviceVerification(user_id, device_id);
    const id = addFlow(request);
    return flowState(id, flows.get(id));
}

async function waitVerification({ flow_id = null, user_id = null, phase = null, sas = false, timeout_ms }) {
    return waitFor(
        () => {
            for (const [id, flow] of flows) {
                if (flow_id && id !== flow_id) continue;
                if (user_id && flow.request.otherUserId !== user_id) continue;
                const state = flowState(id, flow);
                if (phase && state.phase !== phase) continue;
                if (sas && !state.emoji) continue;
                return state;
            }
            return null;
        },
        `verification ${flow_id ?? user_id ?? ""} ${phase ?? ""}${sas ? " sas" : ""}`,
        timeout_ms,
    );
}

async function acceptVerification({ flow_id }) {
    const flow = flowOf(flow_id);
    await flow.request.accept();
    return flowState(flow_id, flow);
}

async function startSas({ flow_id, timeout_ms }) {
    const flow = flowOf(flow_id);
    await waitFor(() => flow.request.phase === VerificationPhase.Ready, "ready", timeout_ms);
    await flow.request.startVerification("m.sas.v1");
    return flowState(flow_id, flow);
}

async function confirmSas({ flow_id, match = true }) {
    const flow = flowOf(flow_id);
    if (!flow.sas) throw new Error("no SAS shown yet");
    if (match) await flow.sas.confirm();
    else flow.sas.mismatch();
    return flowState(flow_id, flow);
}

async function cancelVerification({ flow_id }) {
    const flow = flowOf(flow_id);
    await flow.request.cancel();
    return flowState(flow_id, flow);
}

// --- the loop -----------------------------------------------------------------------------

const commands = {
    login,
    bootstrap_cross_signing: bootstrapCrossSigning,
    cross_signing_status: crossSigningStatus,
    user_trust: userTrust,
    device_trust: deviceTrust,
    wait_devices: waitDevices,
    wait_user_verified: waitUserVerified,
    wait_needs_approval: waitNeedsApproval,
    create_dm: createDm,
    create_room: createRoom,
    join: async ({ room_id }) => (await client.joinRoom(room_id), true),
    wait_joined: waitJoined,
    send_text: sendText,
    messages: listMessages,
    wait_messages: waitMessages,
    to_device: async ({ type = null }) => toDevice.filter((e) => !type || e.type === type),
    request_verification: requestVerification,
    verifications: async () => [...flows].map(([id, flow]) => flowState(id, flow)),
    wait_verification: waitVerification,
    accept_verification: acceptVerification,
    start_sas: startSas,
    confirm_sas: confirmSas,
    cancel_verification: cancelVerification,
    stop: async () => {
        client?.stopClient();
        setTimeout(() => process.exit(0), 50);
        return true;
    },
};

async function handle(line) {
    let msg;
    try {
        msg = JSON.parse(line);
    } catch {
        out(JSON.stringify({ id: null, ok: false, error: "not JSON" }) + "\n");
        return;
    }
    const { id, cmd, ...args } = msg;
    try {
        const fn = commands[cmd];
        if (!fn) throw new Error(`unknown command ${cmd}`);
        const result = await fn(args);
        out(JSON.stringify({ id, ok: true, result: result ?? null }) + "\n");
    } catch (e) {
        out(JSON.stringify({ id, ok: false, error: String(e?.stack ?? e) }) + "\n");
    }
}

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => void handle(line));
rl.on("close", () => {
    client?.stopClient();
    process.exit(0);
});
out(JSON.stringify({ id: null, ok: true, result: "ready" }) + "\n");
