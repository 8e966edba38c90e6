// Writes src/protocol.ts, the TypeScript types of the session protocol, from the published
// JSON Schema (schema/protocol.schema.json at the repository root, generated from the Rust
// types). `node scripts/generate.mjs --check` fails instead when the file differs.
//
// A small generator for the subset of JSON Schema that schemars writes for the protocol:
// $ref to $defs, const, enum, oneOf/anyOf, nullable types, objects with properties and
// required, arrays, additionalProperties, and `true` (any JSON value).
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const schemaPath = join(here, "../../../schema/protocol.schema.json");
const outPath = join(here, "../src/protocol.ts");

const schema = JSON.parse(readFileSync(schemaPath, "utf8"));

const pascal = (name) => name.split("_").map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("");
const refName = (ref) => ref.replace(/^#\/\$defs\//, "");
const ident = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (name) => (ident.test(name) ? name : JSON.stringify(name));

function doc(text, indent = "") {
  if (!text) return "";
  const lines = text.replaceAll("*/", "*\\/").split("\n");
  return `${indent}/**\n${lines.map((l) => `${indent} *${l ? " " + l : ""}`).join("\n")}\n${indent} */\n`;
}

function union(types) {
  const unique = [...new Set(types)];
  return unique.length === 1 ? unique[0] : unique.join(" | ");
}

/** The TypeScript type of a schema node. */
function render(node, indent) {
  const shaping = ["type", "$ref", "const", "enum", "anyOf", "oneOf", "properties", "items", "additionalProperties"];
  if (node === true || !shaping.some((k) => k in node)) return "JsonValue";
  if (node.$ref && !node.properties) return refName(node.$ref);
  if ("const" in node) return JSON.stringify(node.const);
  if (node.enum) return union(node.enum.map((v) => JSON.stringify(v)));
  const alternatives = node.anyOf ?? (node.properties ? null : node.oneOf);
  if (alternatives) {
    const open = alternatives.some((a) => a.type === "string" && !("const" in a));
    const rendered = alternatives
      .filter((a) => !(open && a.type === "string" && !("const" in a)))
      .map((a) => render(a, indent));
    // A catalogue of names a newer peer may add to: the known ones, or any other string.
    return union(open ? [...rendered, "(string & {})"] : rendered);
  }
  if (Array.isArray(node.type)) return union(node.type.map((t) => render({ ...node, type: t }, indent)));
  switch (node.type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array":
      return `${wrap(render(node.items ?? true, indent))}[]`;
    case "object":
    case undefined:
      return object(node, indent);
    default:
      throw new Error(`unsupported schema type ${node.type}`);
  }
}

const wrap = (t) => (/[|&]/.test(t) ? `(${t})` : t);

/** An object type; a `$ref` beside `properties` is an intersection, and a `oneOf` of
 * `required` alone means exactly one of those fields. */
function object(node, indent) {
  const inner = indent + "  ";
  const required = new Set(node.required ?? []);
  const fields = (extraRequired = [], never = []) => {
    const lines = Object.entries(node.properties ?? {}).map(([name, prop]) => {
      if (never.includes(name)) return `${inner}${key(name)}?: never;`;
      const optional = required.has(name) || extraRequired.includes(name) ? "" : "?";
      return `${doc(prop.description, inner)}${inner}${key(name)}${optional}: ${render(prop, inner)};`;
    });
    if (node.additionalProperties === true) lines.push(`${inner}[key: string]: unknown;`);
    else if (node.additionalProperties) lines.push(`${inner}[key: string]: ${render(node.additionalProperties, inner)};`);
    return lines.length ? `{\n${lines.join("\n")}\n${indent}}` : "Record<string, never>";
  };
  let body;
  const exactlyOne = node.oneOf?.every((a) => Object.keys(a).length === 1 && a.required);
  if (node.properties && exactlyOne) {
    const names = node.oneOf.map((a) => a.required[0]);
    body = node.oneOf.map((a) => fields(a.required, names.filter((n) => !a.required.includes(n)))).join(" | ");
  } else {
    body = fields();
  }
  return node.$ref ? `${refName(node.$ref)} & ${wrap(body)}` : body;
}

/** The message unions: one named type per message (`<Type>Message`), then the union. */
function messages(name, def) {
  const variants = def.oneOf.map((variant) => {
    const type = variant.properties.type.const;
    return { type, typeName: `${pascal(type)}Message`, variant };
  });
  let out = "";
  for (const { typeName, variant } of variants) {
    out += `${doc(variant.description)}export type ${typeName} = ${render(variant, "")};\n\n`;
  }
  out += `${doc(def.description)}export type ${name} =\n${variants.map((v) => `  | ${v.typeName}`).join("\n")};\n\n`;
  const constName = name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase() + "_TYPES";
  out += `/** The \`type\` of every ${name}. */\nexport const ${constName} = [\n${variants
    .map((v) => `  ${JSON.stringify(v.type)},`)
    .join("\n")}\n] as const;\n\n`;
  return out;
}

export function generate() {
  const version = schema["x-protocol-version"];
  let out = `// Generated from schema/protocol.schema.json by scripts/generate.mjs (npm run generate). Do not edit.\n`;
  out += `//\n// ${schema.title}: ${schema.$id}\n\n`;
  out += `/** The version of the session protocol these types describe. */\n`;
  out += `export const PROTOCOL_VERSION = ${JSON.stringify(version)};\n\n`;
  out += `/** Any JSON value. */\nexport type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };\n\n`;
  for (const [name, def] of Object.entries(schema.$defs)) {
    if (name === "ClientMessage" || name === "ServerMessage") out += messages(name, def);
    else out += `${doc(def.description)}export type ${name} = ${render(def, "")};\n\n`;
  }
  return out.trimEnd() + "\n";
}

const text = generate();
if (process.argv.includes("--check")) {
  let current = "";
  try {
    current = readFileSync(outPath, "utf8");
  } catch {}
  if (current !== text) {
    console.error(
      "src/protocol.ts differs from what schema/protocol.schema.json generates: run `npm run generate` in clients/typescript and commit the result",
    );
    process.exit(1);
  }
  console.log("src/protocol.ts matches the schema");
} else {
  writeFileSync(outPath, text);
  console.log(`wrote ${outPath}`);
}
