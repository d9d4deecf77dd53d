// Lifeline forms. Loaded with `defer` after app.js.
//
// 1. Fields built from the data. A <textarea data-jsonform="object"> holding a JSON object
//    (a dead letter's input to edit, a skipped step's output) is shown as fields: one per
//    key, labelled with the key; nested objects as fieldsets; lists of scalars as lists you
//    can add to and remove from (a list holding objects keeps a JSON box for that value).
//    Types are kept: a number stays a number, a boolean is a checkbox, null stays null until
//    something is typed, a string stays a string even when it looks like a number. A masked
//    value (one holding the page's data-masked placeholder) is shown masked and read-only;
//    "Replace" makes it editable, and until then it is sent back exactly as shown, so the
//    server keeps the stored value (redact.RestoreAsShown). <textarea data-jsonform="policy"
//    data-jsonform-schema=…> is a retry-policy override: its fields, limits and defaults come
//    from the schema the server wrote (retry.Bounds). The textarea stays the form's field:
//    every change is written back to it, so the form posts the same JSON as without
//    JavaScript, and "Show JSON" shows it (edits there are read back into the fields).
// 2. Errors tied to their fields. After a page load or an htmx swap, every field error
//    (.field-error) is tied to its control (aria-describedby, aria-invalid=true); a control
//    marked invalid with no error of its own is tied to its form's alert. After a page that
//    shows errors loads, or a 422 is swapped in, focus goes to the first field in error (its
//    <details> opened), never left on <body>.
(function () {
  "use strict";

  var uidSeq = 0;
  function uid(prefix) { uidSeq++; return prefix + "-" + uidSeq; }

  // ---------- texts (rendered by the server in the user's language) ----------
  function texts() {
    var el = document.getElementById("jsonform-texts");
    return (el && el.dataset) || {};
  }
  function t(key, fallback, a, b) {
    var m = texts()[key] || fallback;
    if (a !== undefined) m = m.replace("%s", a);
    if (b !== undefined) m = m.replace("%d", b);
    return m;
  }

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (attrs[k] === null || attrs[k] === undefined || attrs[k] === false) return;
        if (k === "text") e.textContent = attrs[k];
        else if (k === "className") e.className = attrs[k];
        else e.setAttribute(k, attrs[k] === true ? "" : attrs[k]);
      });
    }
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }

  function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function isScalar(v) { return v === null || typeof v !== "object"; }
  var NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

  function addDescribedBy(ctl, id) {
    var ids = (ctl.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
    if (ids.indexOf(id) < 0) ids.push(id);
    ctl.setAttribute("aria-describedby", ids.join(" "));
  }
  function removeDescribedBy(ctl, id) {
    var ids = (ctl.getAttribute("aria-describedby") || "").split(/\s+/).filter(function (x) { return x && x !== id; });
    if (ids.length) ctl.setAttribute("aria-describedby", ids.join(" "));
    else ctl.removeAttribute("aria-describedby");
  }

  // ---------- 1. fields built from the data ----------
  function JSONForm(ta) {
    this.ta = ta;
    this.kind = ta.getAttribute("data-jsonform");
    this.masked = ta.getAttribute("data-masked") || "[REDACTED]";
    this.schema = null;
    if (this.kind === "policy") {
      try { this.schema = JSON.parse(ta.getAttribute("data-jsonform-schema") || "[]"); } catch (e) { this.schema = []; }
    }
    this.field = ta.closest(".field") || ta.parentElement;
    this.label = this.field.querySelector('label[for="' + ta.id + '"]');
    this.invalid = {}; // path → message, for values the fields cannot take as typed
    this.added = {}; // paths of keys added here (they can be removed again)
    this.value = null;
    this.build();
  }

  JSONForm.prototype.build = function () {
    var self = this;
    this.box = el("div", { className: "jsonform", "data-testid": "jsonform" });
    this.toggle = el("button", { type: "button", className: "btn btn-quiet btn-sm jf-toggle", "data-testid": "jsonform-toggle",
      "aria-controls": this.ta.id });
    this.problem = el("p", { className: "jf-problem", role: "alert", "data-testid": "jsonform-problem", hidden: true });
    this.root = el("fieldset", { className: "jf-root", "data-testid": "jsonform-fields" },
      [el("legend", { text: this.ta.getAttribute("data-jsonform-legend") || (this.label ? this.label.textContent : "") })]);
    this.body = el("div", { className: "jf-body" });
    this.root.appendChild(this.body);
    this.box.appendChild(el("div", { className: "jf-bar" }, [this.toggle]));
    this.box.appendChild(this.problem);
    this.box.appendChild(this.root);
    this.field.insertBefore(this.box, this.field.firstChild);
    this.toggle.addEventListener("click", function () {
      if (self.mode === "fields") self.showJSON(); else self.showFields(true);
    });
    this.ta.addEventListener("input", function () { self.problem.hidden = true; });
    var form = this.ta.form;
    if (form) {
      form.addEventListener("submit", function (evt) {
        if (self.mode !== "fields") return;
        var first = self.body.querySelector("[aria-invalid=true]");
        if (first && Object.keys(self.invalid).length) {
          evt.preventDefault();
          evt.stopImmediatePropagation();
          first.focus();
        }
      });
    }
    if (!this.showFields(false)) this.showJSON();
  };

  // parse reads the textarea: an object (empty text: an empty one), or null when the fields
  // cannot show it.
  JSONForm.prototype.parse = function () {
    var raw = this.ta.value.trim();
    if (raw === "") return {};
    var v;
    try { v = JSON.parse(raw); } catch (e) { return null; }
    if (!isObject(v)) return null;
    if (this.kind === "policy") {
      var known = {};
      this.schema.forEach(function (f) { known[f.key] = true; });
      if (Object.keys(v).some(function (k) { return !known[k]; })) return null;
    }
    return v;
  };

  JSONForm.prototype.showFields = function (byHand) {
    var v = this.parse();
    if (v === null) {
      if (byHand) {
        this.problem.textContent = t("badjson", "The JSON cannot be shown as fields: correct it here first.");
        this.problem.hidden = false;
        this.ta.focus();
      }
      return false;
    }
    this.value = v;
    this.invalid = {};
    this.mode = "fields";
    this.render();
    this.problem.hidden = true;
    this.root.hidden = false;
    this.ta.hidden = true;
    if (this.label) this.label.hidden = true;
    this.toggle.textContent = t("showjson", "Show JSON");
    this.box.setAttribute("data-mode", "fields");
    return true;
  };

  JSONForm.prototype.showJSON = function () {
    this.mode = "json";
    this.root.hidden = true;
    this.ta.hidden = false;
    if (this.label) this.label.hidden = false;
    this.toggle.textContent = t("showfields", "Show fields");
    this.box.setAttribute("data-mode", "json");
  };

  // sync writes the fields' value back into the textarea: what the form posts.
  JSONForm.prototype.sync = function () {
    var empty = isObject(this.value) && Object.keys(this.value).length === 0;
    this.ta.value = empty && this.kind !== "object-required" ? "" : JSON.stringify(this.value, null, 2);
    this.ta.dispatchEvent(new Event("change", { bubbles: true }));
  };

  JSONForm.prototype.render = function (focusPath) {
    this.body.textContent = "";
    if (this.kind === "policy") this.renderPolicy(this.body);
    else this.renderObject(this.body, this.value, []);
    if (focusPath !== undefined) {
      var target = this.body.querySelector('[data-path="' + CSS.escape(focusPath) + '"] input, [data-path="' + CSS.escape(focusPath) + '"] textarea, [data-path="' + CSS.escape(focusPath) + '"] select');
      if (target) target.focus();
    }
  };

  JSONForm.prototype.setInvalid = function (ctl, path, msg) {
    var errID = ctl.id + "-problem";
    var wrap = ctl.closest(".jf-field") || ctl.parentElement;
    var p = document.getElementById(errID);
    if (msg) {
      this.invalid[path] = msg;
      if (!p) {
        p = el("p", { id: errID, className: "jf-problem", "data-testid": "jsonform-field-problem" });
        wrap.appendChild(p);
      }
      p.textContent = msg;
      ctl.setAttribute("aria-invalid", "true");
      addDescribedBy(ctl, errID);
    } else {
      delete this.invalid[path];
      if (p) p.remove();
      ctl.removeAttribute("aria-invalid");
      removeDescribedBy(ctl, errID);
    }
  };

  JSONForm.prototype.renderObject = function (container, obj, path) {
    var self = this;
    var keys = Object.keys(obj);
    if (keys.length === 0) container.appendChild(el("p", { className: "muted jf-empty", text: t("empty", "No fields yet.") }));
    keys.forEach(function (k) { container.appendChild(self.member(obj, k, path.concat(k))); });
    container.appendChild(this.addFieldRow(obj, path));
  };

  // member is the field (or group) of obj[key].
  JSONForm.prototype.member = function (obj, key, path) {
    var v = obj[key], p = path.join("."), self = this, node;
    if (isObject(v)) {
      node = el("fieldset", { className: "jf-group", "data-testid": "jsonform-group", "data-path": p }, [el("legend", { text: key })]);
      this.renderObject(node, v, path);
    } else if (Array.isArray(v) && v.every(isScalar)) {
      node = this.list(obj, key, path);
    } else if (Array.isArray(v)) {
      node = this.jsonBox(obj, key, path);
    } else {
      node = this.scalar(obj, key, key, path);
    }
    if (this.added[p]) {
      var rm = el("button", { type: "button", className: "btn btn-quiet btn-sm jf-remove", "data-testid": "jsonform-remove-field",
        "aria-label": t("removefield", "Remove the field %s", key), text: t("remove", "Remove") });
      rm.addEventListener("click", function () {
        delete obj[key];
        delete self.added[p];
        self.sync();
        self.render();
        var add = self.body.querySelector('[data-add-path="' + CSS.escape(path.slice(0, -1).join(".")) + '"] input');
        if (add) add.focus();
      });
      node.appendChild(rm);
    }
    return node;
  };

  // scalar is one input for parent[key] (an object's member or a list's item), labelled label.
  JSONForm.prototype.scalar = function (parent, key, label, path, hiddenLabel) {
    var self = this, v = parent[key], p = path.join("."), id = uid(this.ta.id + "-f");
    var wrap = el("div", { className: "jf-field", "data-testid": "jsonform-field", "data-path": p });
    var lab = el("label", { "for": id, className: hiddenLabel ? "visually-hidden" : null, text: label });
    var ctl;
    if (typeof v === "boolean") {
      ctl = el("input", { type: "checkbox", id: id, "data-type": "boolean" });
      ctl.checked = v;
      ctl.addEventListener("change", function () { parent[key] = ctl.checked; self.sync(); });
      wrap.className += " jf-check";
      wrap.appendChild(ctl);
      wrap.appendChild(lab);
      return wrap;
    }
    wrap.appendChild(lab);
    if (typeof v === "string" && v.indexOf(this.masked) >= 0) {
      return this.maskedField(wrap, parent, key, id);
    }
    var multiline = typeof v === "string" && (v.indexOf("\n") >= 0 || v.length > 80);
    ctl = el(multiline ? "textarea" : "input", { id: id, rows: multiline ? "3" : null, type: multiline ? null : "text",
      spellcheck: "false", autocomplete: "off" });
    if (typeof v === "number") {
      ctl.setAttribute("inputmode", "decimal");
      ctl.setAttribute("data-type", "number");
      ctl.value = String(v);
      ctl.addEventListener("input", function () {
        var s = ctl.value.trim();
        if (NUMBER.test(s)) {
          parent[key] = Number(s);
          self.setInvalid(ctl, p, "");
          self.sync();
        } else {
          self.setInvalid(ctl, p, t("notnumber", "Type a number (digits, a dot for decimals)."));
        }
      });
    } else if (v === null) {
      ctl.setAttribute("data-type", "null");
      ctl.setAttribute("placeholder", "null");
      var note = el("span", { className: "hint jf-null", id: id + "-null", text: t("nullvalue", "Empty (null) until you type something.") });
      addDescribedBy(ctl, note.id);
      wrap.appendChild(note);
      ctl.addEventListener("input", function () { parent[key] = ctl.value === "" ? null : ctl.value; self.sync(); });
    } else {
      ctl.setAttribute("data-type", "string");
      ctl.value = String(v);
      ctl.addEventListener("input", function () { parent[key] = ctl.value; self.sync(); });
    }
    wrap.insertBefore(ctl, wrap.children[1] || null);
    return wrap;
  };

  // maskedField shows a masked value read-only; "Replace" lets a new value be typed, "Keep the
  // stored value" puts the mask back (sent as shown, the server keeps what it stored).
  JSONForm.prototype.maskedField = function (wrap, parent, key, id) {
    var self = this, shown = parent[key];
    var ctl = el("input", { type: "text", id: id, readonly: true, "data-type": "masked", "data-masked": "true", autocomplete: "off" });
    ctl.value = shown === this.masked ? "••••••••" : shown;
    var hint = el("span", { className: "hint jf-masked-hint", id: id + "-masked", text: t("masked", "Hidden: the stored value is kept unless you replace it.") });
    addDescribedBy(ctl, hint.id);
    var btn = el("button", { type: "button", className: "btn btn-secondary btn-sm", "data-testid": "jsonform-replace",
      "aria-label": t("replacefield", "Replace the hidden value of %s", key), text: t("replace", "Replace") });
    var replacing = false;
    ctl.addEventListener("input", function () { if (replacing) { parent[key] = ctl.value; self.sync(); } });
    btn.addEventListener("click", function () {
      replacing = !replacing;
      if (replacing) {
        ctl.readOnly = false;
        ctl.value = "";
        ctl.setAttribute("data-masked", "replaced");
        parent[key] = "";
        btn.textContent = t("keepmasked", "Keep the stored value");
        btn.setAttribute("aria-label", t("keepmaskedfield", "Keep the stored value of %s", key));
        hint.textContent = t("replacing", "Type the new value.");
        ctl.focus();
      } else {
        ctl.readOnly = true;
        ctl.value = shown === self.masked ? "••••••••" : shown;
        ctl.setAttribute("data-masked", "true");
        parent[key] = shown;
        btn.textContent = t("replace", "Replace");
        btn.setAttribute("aria-label", t("replacefield", "Replace the hidden value of %s", key));
        hint.textContent = t("masked", "Hidden: the stored value is kept unless you replace it.");
        btn.focus();
      }
      self.sync();
    });
    wrap.className += " jf-masked";
    wrap.appendChild(el("div", { className: "jf-inline" }, [ctl, btn]));
    wrap.appendChild(hint);
    return wrap;
  };

  // list shows a list of scalars: one input per item, "Remove" on each, "Add" below.
  JSONForm.prototype.list = function (obj, key, path, opts) {
    var self = this, arr = obj[key], p = path.join(".");
    opts = opts || {};
    var fs = el("fieldset", { className: "jf-list", "data-testid": "jsonform-list", "data-path": p }, [el("legend", { text: opts.label || key })]);
    if (opts.hint) fs.appendChild(el("p", { className: "hint", text: opts.hint }));
    var ol = el("ol", { className: "jf-items" });
    arr.forEach(function (_, i) {
      var li = el("li", { className: "jf-item" });
      var item = opts.item ? opts.item(arr, i) : self.scalar(arr, i, t("item", "%s, item %d", opts.label || key, i + 1), path.concat(String(i)), true);
      var rm = el("button", { type: "button", className: "btn btn-quiet btn-sm", "data-testid": "jsonform-remove",
        "aria-label": t("removeitem", "Remove %s, item %d", opts.label || key, i + 1), text: t("remove", "Remove") });
      rm.addEventListener("click", function () {
        arr.splice(i, 1);
        if (opts.onEmpty && arr.length === 0) opts.onEmpty();
        self.sync();
        self.render();
        var items = self.body.querySelectorAll('[data-path="' + CSS.escape(p) + '"] .jf-item input');
        var next = items[Math.min(i, items.length - 1)] || self.body.querySelector('[data-path="' + CSS.escape(p) + '"] [data-testid=jsonform-add]');
        if (next) next.focus();
      });
      item.appendChild(rm);
      li.appendChild(item);
      ol.appendChild(li);
    });
    fs.appendChild(ol);
    var add = el("button", { type: "button", className: "btn btn-secondary btn-sm", "data-testid": "jsonform-add",
      "aria-label": t("additem", "Add an item to %s", opts.label || key), text: t("add", "Add") });
    add.addEventListener("click", function () {
      var model = opts.newItem ? opts.newItem() : arr.length ? arr[arr.length - 1] : "";
      var blank = typeof model === "number" ? 0 : typeof model === "boolean" ? false : "";
      if (opts.beforeAdd) arr = opts.beforeAdd();
      arr.push(opts.newItem ? model : blank);
      self.sync();
      self.render();
      var items = self.body.querySelectorAll('[data-path="' + CSS.escape(p) + '"] .jf-item input');
      if (items.length) items[items.length - 1].focus();
    });
    fs.appendChild(add);
    return fs;
  };

  // jsonBox keeps a value the fields cannot show (a list of objects) as JSON, for that value only.
  JSONForm.prototype.jsonBox = function (obj, key, path) {
    var self = this, p = path.join("."), id = uid(this.ta.id + "-f");
    var ctl = el("textarea", { id: id, className: "code-input", rows: "4", spellcheck: "false", "data-type": "json" });
    ctl.value = JSON.stringify(obj[key], null, 2);
    ctl.addEventListener("input", function () {
      try {
        obj[key] = JSON.parse(ctl.value);
        self.setInvalid(ctl, p, "");
        self.sync();
      } catch (e) {
        self.setInvalid(ctl, p, t("notjson", "Not valid JSON yet."));
      }
    });
    return el("div", { className: "jf-field", "data-testid": "jsonform-field", "data-path": p },
      [el("label", { "for": id, text: key + " (JSON)" }), ctl]);
  };

  // addFieldRow adds a member to obj: its name and its type.
  JSONForm.prototype.addFieldRow = function (obj, path) {
    var self = this, p = path.join("."), id = uid(this.ta.id + "-new");
    var name = el("input", { type: "text", id: id, autocomplete: "off", spellcheck: "false" });
    var type = el("select", { id: id + "-type", "aria-label": t("fieldtype", "Type of the new field") }, [
      el("option", { value: "string", text: t("typetext", "text") }),
      el("option", { value: "number", text: t("typenumber", "number") }),
      el("option", { value: "boolean", text: t("typebool", "yes/no") }),
      el("option", { value: "list", text: t("typelist", "list") })
    ]);
    var btn = el("button", { type: "button", className: "btn btn-secondary btn-sm", "data-testid": "jsonform-add-field", text: t("addfield", "Add field") });
    var row = el("div", { className: "jf-add", "data-add-path": p }, [
      el("label", { "for": id, text: path.length ? t("newfieldin", "New field in %s", path[path.length - 1]) : t("newfield", "New field") }),
      el("div", { className: "jf-inline" }, [name, type, btn])
    ]);
    function add() {
      var k = name.value.trim();
      if (k === "" || Object.prototype.hasOwnProperty.call(obj, k)) {
        self.setInvalid(name, p + "#new", k === "" ? t("namerequired", "Name the field.") : t("nametaken", "There is already a field %s.", k));
        name.focus();
        return;
      }
      self.setInvalid(name, p + "#new", "");
      obj[k] = { string: "", number: 0, "boolean": false, list: [] }[type.value];
      var np = path.concat(k).join(".");
      self.added[np] = true;
      self.sync();
      self.render(np);
    }
    btn.addEventListener("click", add);
    name.addEventListener("keydown", function (evt) { if (evt.key === "Enter") { evt.preventDefault(); add(); } });
    return row;
  };

  // renderPolicy shows the retry-policy override's fields from the schema: numbers with their
  // limits and defaults, the backoff type, the custom schedule, the error types to retry.
  JSONForm.prototype.renderPolicy = function (container) {
    var self = this, v = this.value;
    this.schema.forEach(function (f) {
      var id = uid(self.ta.id + "-" + f.key);
      if (f.kind === "int" || f.kind === "float") {
        var ctl = el("input", { type: "number", id: id, min: String(f.min), max: String(f.max), step: f.kind === "int" ? "1" : String(f.step || "any"),
          inputmode: f.kind === "int" ? "numeric" : "decimal", placeholder: f.default !== undefined ? String(f.default) : null, "data-type": "number" });
        if (v[f.key] !== undefined) ctl.value = String(v[f.key]);
        var hint = el("span", { className: "hint", id: id + "-hint", text: f.hint || "" });
        ctl.setAttribute("aria-describedby", hint.id);
        ctl.addEventListener("input", function () {
          var s = ctl.value.trim();
          if (s === "" && !ctl.validity.badInput) {
            delete v[f.key];
            self.setInvalid(ctl, f.key, "");
          } else {
            var n = Number(s);
            var ok = s !== "" && NUMBER.test(s) && (f.kind !== "int" || Number.isInteger(n)) &&
              ((n >= f.min && n <= f.max) || (f.zeroAllowed && n === 0));
            if (!ok) { self.setInvalid(ctl, f.key, f.range || t("notnumber", "Type a number.")); return; }
            v[f.key] = n;
            self.setInvalid(ctl, f.key, "");
          }
          self.sync();
        });
        container.appendChild(el("div", { className: "jf-field", "data-testid": "jsonform-field", "data-path": f.key },
          [el("label", { "for": id, className: "jf-label-text", text: f.label }), ctl, hint]));
      } else if (f.kind === "enum") {
        var sel = el("select", { id: id, "data-type": "enum" }, [el("option", { value: "", text: f.defaultLabel || "" })]
          .concat((f.options || []).map(function (o) { return el("option", { value: o.value, text: o.label }); })));
        sel.value = v[f.key] || "";
        sel.addEventListener("change", function () {
          if (sel.value === "") delete v[f.key]; else v[f.key] = sel.value;
          self.sync();
        });
        container.appendChild(el("div", { className: "jf-field", "data-testid": "jsonform-field", "data-path": f.key },
          [el("label", { "for": id, className: "jf-label-text", text: f.label }), sel]));
      } else if (f.kind === "types") {
        var fs = el("fieldset", { className: "jf-group jf-types", "data-testid": "jsonform-group", "data-path": f.key }, [el("legend", { text: f.label })]);
        if (f.hint) fs.appendChild(el("p", { className: "hint", text: f.hint }));
        var chosen = v[f.key] || [];
        (f.options || []).forEach(function (o) {
          var cid = uid(id);
          var cb = el("input", { type: "checkbox", id: cid, value: o.value });
          cb.checked = chosen.indexOf(o.value) >= 0;
          cb.addEventListener("change", function () {
            var now = Array.prototype.slice.call(fs.querySelectorAll("input:checked")).map(function (x) { return x.value; });
            if (now.length) v[f.key] = now; else delete v[f.key];
            self.sync();
          });
          fs.appendChild(el("div", { className: "jf-check" }, [cb, el("label", { "for": cid, text: o.label })]));
        });
        container.appendChild(fs);
      } else if (f.kind === "list") {
        var holder = { list: v[f.key] ? v[f.key] : [] };
        container.appendChild(self.list(holder, "list", [f.key], {
          label: f.label,
          hint: f.hint,
          newItem: function () { return f.default || f.min; },
          beforeAdd: function () { if (!v[f.key]) v[f.key] = holder.list; return v[f.key]; },
          onEmpty: function () { delete v[f.key]; },
          item: function (arr, i) {
            var iid = uid(id);
            var ctl = el("input", { type: "number", id: iid, min: String(f.min), max: String(f.max), step: "1", inputmode: "numeric", "data-type": "number" });
            ctl.value = String(arr[i]);
            ctl.addEventListener("input", function () {
              var n = Number(ctl.value);
              if (ctl.value.trim() === "" || !Number.isInteger(n) || n < f.min || n > f.max) {
                self.setInvalid(ctl, f.key + "." + i, f.range || t("notnumber", "Type a number."));
                return;
              }
              arr[i] = n;
              self.setInvalid(ctl, f.key + "." + i, "");
              self.sync();
            });
            return el("div", { className: "jf-field", "data-testid": "jsonform-field", "data-path": f.key + "." + i },
              [el("label", { "for": iid, className: "visually-hidden", text: t("item", "%s, item %d", f.label, i + 1) }), ctl]);
          }
        }));
      }
    });
  };

  function enhance(root) {
    (root || document).querySelectorAll("textarea[data-jsonform]").forEach(function (ta) {
      if (ta.__jsonform) return;
      ta.__jsonform = new JSONForm(ta);
      // A server error about the value: tie it to the fields too.
      var err = ta.__jsonform.field.querySelector(".field-error");
      if (err && ta.getAttribute("aria-invalid") === "true" && ta.__jsonform.mode === "fields") {
        if (!err.id) err.id = ta.id + "-error";
        addDescribedBy(ta.__jsonform.root, err.id);
        var first = ta.__jsonform.body.querySelector("input:not([readonly]), select, textarea");
        if (first) {
          first.setAttribute("aria-invalid", "true");
          addDescribedBy(first, err.id);
        }
      }
    });
  }

  // ---------- 2. errors tied to their fields ----------
  var CONTROLS = "input:not([type=hidden]):not([type=submit]):not([type=button]), select, textarea";

  function visible(e) { return !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length); }

  // tieErrors ties each field error under root to its control, and each control marked
  // invalid without an error of its own to its form's alert.
  function tieErrors(root) {
    root = root || document;
    root.querySelectorAll(".field-error").forEach(function (err) {
      // A list of errors (its items are .field-error) is tied as a whole, by its own id.
      var list = err.closest("ul.field-errors");
      var desc = list || err;
      var box = desc.closest(".field, fieldset") || desc.parentElement;
      if (!box) return;
      var controls = Array.prototype.filter.call(box.querySelectorAll(CONTROLS), function (c) {
        return !c.closest(".jsonform") && (c.compareDocumentPosition(desc) & Node.DOCUMENT_POSITION_FOLLOWING);
      });
      if (!controls.length && box.tagName === "FIELDSET") controls = [box];
      // A list's refused filter names its query key (data-field): the control of that name.
      var key = err.getAttribute("data-field");
      if (!controls.length && key) {
        desc = err;
        controls = Array.prototype.filter.call(document.querySelectorAll("[name]"), function (c) {
          return c.getAttribute("name") === key && c.matches(CONTROLS);
        });
      }
      if (!controls.length) return;
      if (!desc.id) desc.id = uid((controls[0].id || "field") + "-error");
      controls.forEach(function (c) {
        if (!describedBy(c, desc)) addDescribedBy(c, desc.id);
        c.setAttribute("aria-invalid", "true");
      });
    });
    root.querySelectorAll('[aria-invalid="true"]').forEach(function (c) {
      var tied = (c.getAttribute("aria-describedby") || "").split(/\s+/).some(function (id) {
        var d = id && document.getElementById(id);
        return d && (d.matches(".field-error, .field-errors, .jf-problem, [role=alert]") || d.querySelector(".field-error"));
      });
      if (tied) return;
      // The form's own message: in it, or just around it (a login's "wrong e-mail or password").
      var form = c.form || c.closest("form");
      var ALERT = "[data-testid=form-error], .alert--danger[role=alert]";
      var alert = form && (form.querySelector(ALERT) ||
        (form.parentElement && form.parentElement.querySelector(":scope > " + ALERT.split(", ").join(", :scope > "))));
      if (!alert) return;
      if (!alert.id) alert.id = uid("form-error");
      if (!describedBy(c, alert)) addDescribedBy(c, alert.id);
    });
  }

  // describedBy reports whether c is already described by d (or by an element holding it).
  function describedBy(c, d) {
    return (c.getAttribute("aria-describedby") || "").split(/\s+/).some(function (id) {
      var e = id && document.getElementById(id);
      return e && e.contains(d);
    });
  }

  // focusFirstError puts focus on the first field in error under root (opening the
  // <details> it is folded in). It reports whether there was one.
  function focusFirstError(root) {
    var all = (root || document).querySelectorAll('[aria-invalid="true"]');
    for (var i = 0; i < all.length; i++) {
      var c = all[i];
      if (c.tagName === "FIELDSET") c = c.querySelector(CONTROLS) || c;
      if (c.matches("fieldset, .jf-root")) continue;
      if (c.hidden || c.closest("[hidden]")) continue;
      for (var d = c.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
      if (!visible(c)) continue;
      c.focus();
      return document.activeElement === c;
    }
    return false;
  }

  // ---------- 3. rows added from a template ----------
  // A form's <div data-rows=NAME> holds rows; <template data-row-template=NAME> is an empty
  // row whose field names and ids hold "__i__"; a <button data-row-add=NAME> (hidden until
  // this runs: without JavaScript the form's empty last row adds one) appends a copy with a
  // fresh index and puts focus in it. Rows are removed by their own "remove" box, which the
  // server reads, so removing works the same with and without JavaScript.
  var rowSeq = 0;
  function enhanceRows(root) {
    root.querySelectorAll("button[data-row-add]:not([data-rows-ready])").forEach(function (btn) {
      var name = btn.getAttribute("data-row-add");
      var form = btn.closest("form") || document;
      var rows = form.querySelector('[data-rows="' + CSS.escape(name) + '"]');
      var tpl = form.querySelector('template[data-row-template="' + CSS.escape(name) + '"]');
      if (!rows || !tpl) return;
      btn.setAttribute("data-rows-ready", "");
      btn.hidden = false;
      btn.addEventListener("click", function () {
        rowSeq++;
        var index = String(1000 + rowSeq);
        var row = tpl.content.firstElementChild.cloneNode(true);
        row.querySelectorAll("[name], [id], [for]").forEach(function (e) {
          ["name", "id", "for"].forEach(function (a) {
            var v = e.getAttribute(a);
            if (v && v.indexOf("__i__") >= 0) e.setAttribute(a, v.split("__i__").join(index));
          });
        });
        rows.appendChild(row);
        var first = row.querySelector("input, select");
        if (first) first.focus();
      });
    });
  }

  function start() {
    enhanceRows(document);
    enhance(document);
    tieErrors(document);
    focusFirstError(document); // a page shown again with its errors (a refused full-page post)
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();

  // A swapped region may have replaced the form (hx-swap=outerHTML): look at the whole page.
  document.addEventListener("htmx:afterSettle", function (evt) {
    enhance(document);
    tieErrors(document);
    var xhr = evt.detail && evt.detail.xhr;
    if (xhr && xhr.status === 422) focusFirstError(document);
  });

  window.lifelineForms = { tieErrors: tieErrors, focusFirstError: focusFirstError, enhance: enhance };
})();
