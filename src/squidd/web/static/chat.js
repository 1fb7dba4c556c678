// The dashboard's chat: sends a message, shows the answer as it is written.
// Served by squidd under script-src 'self'; every text is set with textContent, never as
// markup. The server's stream is one JSON object per line (web/chat.py).
"use strict";

(function () {
  const form = document.getElementById("chat-form");
  const log = document.getElementById("chat-log");
  const input = document.getElementById("chat-text");
  if (!form || !log || !input || !window.fetch) {
    return; // the plain form still works
  }
  const csrf = form.dataset.csrf;

  function bubble(who, text) {
    const box = document.createElement("div");
    box.className = "msg " + (who === "you" ? "user" : "assistant");
    const name = document.createElement("div");
    name.className = "who";
    name.textContent = who;
    const body = document.createElement("pre");
    body.textContent = text;
    box.append(name, body);
    log.append(box);
    box.scrollIntoView({ block: "end" });
    return box;
  }

  function post(path, fields) {
    return fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(Object.assign({ csrf: csrf }, fields)),
    });
  }

  function answerButtons(box, question) {
    const row = document.createElement("div");
    row.className = "answers";
    for (const [label, choice] of [["Approve", "yes"], ["Deny", "no"]]) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = label;
      button.setAttribute("aria-label", label + " " + question);
      button.dataset.choice = choice;
      button.addEventListener("click", async () => {
        row.querySelectorAll("button").forEach((b) => { b.disabled = true; });
        const done = await post("/approvals/" + question + "/" + choice, {});
        const note = document.createElement("span");
        note.className = "answered";
        note.textContent = done.ok ? (choice === "yes" ? " approved" : " denied") : " not taken";
        row.append(note);
      });
      row.append(button);
    }
    box.append(row);
  }

  async function send(text) {
    bubble("you", text);
    let draft = null;
    const response = await post("/chat/stream", { text: text });
    if (!response.ok || !response.body) {
      bubble("squidd", "(the message was not taken: " + response.status + ")");
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        break;
      }
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        if (!line.trim()) {
          continue;
        }
        const event = JSON.parse(line);
        if (event.draft !== undefined) {
          if (draft === null) {
            draft = bubble("squidd", "");
            draft.classList.add("draft");
          }
          draft.querySelector("pre").textContent = event.draft;
        } else if (event.part !== undefined) {
          const box = draft !== null ? draft : bubble("squidd", "");
          box.classList.remove("draft");
          box.querySelector("pre").textContent = event.part;
          if (event.question) {
            answerButtons(box, event.question);
          }
          draft = null;
        } else if (event.done) {
          log.dataset.state = "idle";
        }
      }
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) {
      return;
    }
    input.value = "";
    log.dataset.state = "busy";
    send(text).catch((error) => {
      bubble("squidd", "(the answer could not be read: " + error + ")");
      log.dataset.state = "idle";
    });
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      form.requestSubmit();
    }
  });
})();
