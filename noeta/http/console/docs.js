// Renders /openapi.json as a readable page: one section per endpoint, its parameters, body and
// answers, with the schemas they refer to. No third-party code.
const root = document.getElementById("docs");

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") el.textContent = value;
    else if (value !== undefined && value !== null) el.setAttribute(name, String(value));
  }
  for (const child of children.flat()) if (child) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}

function typeOf(schema) {
  if (!schema) return "";
  if (schema.$ref) {
    const name = schema.$ref.split("/").pop();
    return h("a", { href: `#schema-${name}`, text: name });
  }
  if (schema.anyOf) return h("span", {}, ...schema.anyOf.flatMap((s, i) => (i ? [" | ", typeOf(s)] : [typeOf(s)])));
  if (schema.type === "array") return h("span", {}, "array of ", typeOf(schema.items));
  if (schema.enum) return h("span", { text: schema.enum.map((v) => JSON.stringify(v)).join(" | ") });
  if (schema.const !== undefined) return h("span", { text: JSON.stringify(schema.const) });
  return h("span", { text: schema.type || "any" });
}

function schemaTable(schema) {
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  return h("table", {}, h("thead", {}, h("tr", {}, h("th", { text: "field" }), h("th", { text: "type" }), h("th", { text: "" }))),
    h("tbody", {}, Object.entries(props).map(([name, p]) => h("tr", {},
      h("td", {}, h("code", { text: name }), required.has(name) ? h("span", { class: "muted", text: " required" }) : null),
      h("td", {}, typeOf(p)),
      h("td", { class: "muted", text: p.description || (p.default !== undefined ? `default ${JSON.stringify(p.default)}` : "") })))));
}

fetch("/openapi.json").then((r) => r.json()).then((doc) => {
  const sections = [h("h1", { text: `${doc.info.title} ${doc.info.version}` }), h("p", { text: doc.info.description })];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const parts = [h("h2", {}, h("code", { text: `${method.toUpperCase()} ${path}` })), h("p", { text: op.summary })];
      if (op.parameters) parts.push(h("p", {}, "parameters: ", ...op.parameters.flatMap((p, i) => [i ? ", " : "", h("code", { text: p.name }), ` (${p.in}${p.description ? `: ${p.description}` : ""})`])));
      const body = op.requestBody && op.requestBody.content["application/json"];
      if (body) parts.push(h("p", {}, "body: ", typeOf(body.schema)));
      parts.push(h("ul", {}, Object.entries(op.responses).map(([status, r]) => {
        const content = r.content || {};
        const kind = Object.keys(content)[0];
        return h("li", {}, h("b", { text: status }), ` ${r.description} `, kind === "text/event-stream" ? "(Server-Sent Events)" : kind ? typeOf(content[kind].schema) : "");
      })));
      sections.push(h("section", { class: "card" }, parts));
    }
  }
  sections.push(h("h1", { text: "Schemas" }));
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    sections.push(h("section", { class: "card", id: `schema-${name}` }, h("h2", { text: name }),
      schema.description ? h("p", { text: schema.description }) : null,
      schema.properties ? schemaTable(schema) : h("p", {}, typeOf(schema))));
  }
  root.replaceChildren(...sections);
}).catch((err) => { root.textContent = `Could not load /openapi.json: ${err}`; });
