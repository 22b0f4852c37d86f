// What a key's grants allow, read as the server reads them (app/access.py): a grant's queue
// pattern is an fnmatch glob; listing (no queue named) needs a pattern of `*` only. The page only
// hides what the key may not do: the API refuses it anyway. An action is also granted by those that
// imply it (app/access.py, IMPLIED): admin implies read.

const IMPLIED = { admin: ["read"] };

function grantsAction(actions, action) {
  return actions.some((a) => a === action || (IMPLIED[a] || []).includes(action));
}

function globToRegExp(glob) {
  let out = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "*") out += ".*";
    else if (c === "?") out += ".";
    else if (c === "[") {
      const end = glob.indexOf("]", i + 2);
      if (end < 0) out += "\\[";
      else {
        let set = glob.slice(i + 1, end);
        if (set.startsWith("!")) set = "^" + set.slice(1);
        out += "[" + set.replace(/\\/g, "\\\\") + "]";
        i = end;
      }
    } else out += c.replace(/[.+^${}()|\\\]-]/g, "\\$&");
  }
  return new RegExp("^(?:" + out + ")$", "s");
}

export function allows(grants, action, queue) {
  return grants.some((grant) => {
    if (!grantsAction(grant.actions, action)) return false;
    if (queue === null) return /^\*+$/.test(grant.queues);
    return globToRegExp(grant.queues).test(queue);
  });
}

// Whether the key administers every queue (admin on a `*` pattern): what the keys need.
export function administersAll(grants) {
  return allows(grants, "admin", null);
}
